package cudak

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/backend"
)

// TestUnaryOpsInOrder checks that kernels.cu's UNARY_OPS lists
// backend.UnaryOp's functions in the order of their constants: Map passes
// the constant's value, which selects the case of that number.
func TestUnaryOpsInOrder(t *testing.T) {
	list := regexp.MustCompile(`(?s)#define UNARY_OPS\(X\)(.*?)\n\n`).FindStringSubmatch(Source)
	if list == nil {
		t.Fatal("kernels.cu has no UNARY_OPS list")
	}
	var got []string
	for _, m := range regexp.MustCompile(`X\((\w+),`).FindAllStringSubmatch(list[1], -1) {
		got = append(got, m[1])
	}
	var want []string
	for _, op := range backend.UnaryOps() {
		want = append(want, strings.ToUpper(op.String()))
	}
	if !slices.Equal(got, want) {
		t.Errorf("UNARY_OPS lists %v, want backend's %v", got, want)
	}
}
