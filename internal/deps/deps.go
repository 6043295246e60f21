//go:build tools

// Package deps pins modules that later packages build on, so that the module
// graph is settled before they land. It is never compiled.
package deps

import (
	_ "github.com/schollz/progressbar/v3"
	_ "gorgonia.org/gorgonia"
	_ "gorgonia.org/tensor"
)
