package models

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Patches cuts a batch of images (batch, channels, side, side) into the
// ViT's input (batch, (side/patch)^2, patch*patch*channels) inside the
// graph: the patches Patchify cuts on the host, in the same order, by a
// Reshape, a Transpose and a Reshape. A graph that starts from whole images
// (an exported model) uses it; training fills Patchify's patches instead.
func Patches(images *G.Node, patch int) (*G.Node, error) {
	s := images.Shape()
	if images.Dims() != 4 || s[2] != s[3] || patch < 1 || s[2]%patch != 0 {
		return nil, fmt.Errorf("models: patches of side %d from images %v, want (batch, channels, side, side) with the patch dividing the side", patch, s)
	}
	b, c, per := s[0], s[1], s[2]/patch
	// (batch, channel, patch row, row in patch, patch column, column in patch)
	x, err := G.Reshape(images, tensor.Shape{b, c, per, patch, per, patch})
	if err != nil {
		return nil, fmt.Errorf("models: patches: %w", err)
	}
	// (batch, patch row, patch column, channel, row in patch, column in patch)
	if x, err = G.Transpose(x, 0, 2, 4, 1, 3, 5); err != nil {
		return nil, fmt.Errorf("models: patches: %w", err)
	}
	if x, err = G.Reshape(x, tensor.Shape{b, per * per, c * patch * patch}); err != nil {
		return nil, fmt.Errorf("models: patches: %w", err)
	}
	return x, nil
}
