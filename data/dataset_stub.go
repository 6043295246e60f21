package data

// Dataset is a labelled data set of fixed-shape examples. (Stub until the
// data branch lands.)
type Dataset interface {
	Len() int
	Shape() []int
	NumClasses() int
	Example(i int, x []float32) (label int, err error)
}

func (s *Set) Len() int        { return s.N }
func (s *Set) Shape() []int    { return []int{s.C, s.H, s.W} }
func (s *Set) NumClasses() int { return s.Classes }
func (s *Set) Example(i int, x []float32) (int, error) {
	copy(x, s.Image(i))
	return int(s.Y[i]), nil
}
