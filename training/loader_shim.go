package training

import (
	"errors"

	"github.com/orthonet/orthonet/data"
)

func newLoader(d data.Dataset, batch int, seed uint64) (*data.Loader, error) {
	s, ok := d.(*data.Set)
	if !ok {
		return nil, errors.New("shim")
	}
	return data.NewLoader(s, batch, seed)
}
