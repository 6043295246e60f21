package main

import (
	_ "embed"
	"fmt"
	"slices"
)

// corpus is the text the model learns: about 3 KB of plain English written
// for this example (the orthonet authors', public domain).
//
//go:embed corpus.txt
var corpus string

// vocabulary maps the characters of a text to the indices 0 to len-1, in
// the order of their code points.
type vocabulary struct {
	chars []rune
	index map[rune]int
}

// newVocabulary returns the vocabulary of the characters in text.
func newVocabulary(text string) vocabulary {
	v := vocabulary{index: map[rune]int{}}
	for _, c := range text {
		if _, ok := v.index[c]; !ok {
			v.index[c] = 0
			v.chars = append(v.chars, c)
		}
	}
	slices.Sort(v.chars)
	for i, c := range v.chars {
		v.index[c] = i
	}
	return v
}

// encode returns the indices of text's characters, or an error naming one
// not in the vocabulary.
func (v vocabulary) encode(text string) ([]int, error) {
	ids := make([]int, 0, len(text))
	for _, c := range text {
		i, ok := v.index[c]
		if !ok {
			return nil, fmt.Errorf("charrnn: character %q is not in the vocabulary", c)
		}
		ids = append(ids, i)
	}
	return ids, nil
}

// decode returns the text of the indices ids; an index out of range is
// written as U+FFFD.
func (v vocabulary) decode(ids []int) string {
	out := make([]rune, len(ids))
	for i, id := range ids {
		out[i] = '\uFFFD'
		if id >= 0 && id < len(v.chars) {
			out[i] = v.chars[id]
		}
	}
	return string(out)
}

// textSet is a text as a data set of sequences of seqLen+1 consecutive
// characters: example i starts at character i*seqLen, so consecutive
// examples share one character and every character but the first is a
// target once. Its examples are the character indices as float32, the
// layout charModel.feed takes; their labels are 0 (the targets are the
// sequence's own next characters).
type textSet struct {
	vocab  vocabulary
	ids    []int
	seqLen int
}

// newTextSet returns text as sequences of seqLen+1 characters over the
// vocabulary of text's own characters.
func newTextSet(text string, seqLen int) (*textSet, error) {
	v := newVocabulary(text)
	ids, err := v.encode(text)
	if err != nil {
		return nil, err
	}
	if seqLen < 1 || len(ids) < seqLen+1 {
		return nil, fmt.Errorf("charrnn: a text of %d characters holds no sequence of %d", len(ids), seqLen+1)
	}
	return &textSet{vocab: v, ids: ids, seqLen: seqLen}, nil
}

// Len returns the number of sequences.
func (s *textSet) Len() int { return (len(s.ids) - 1) / s.seqLen }

// Shape returns the shape of an example, [seqLen+1].
func (s *textSet) Shape() []int { return []int{s.seqLen + 1} }

// NumClasses returns the size of the vocabulary.
func (s *textSet) NumClasses() int { return len(s.vocab.chars) }

// Example writes the character indices of sequence i into x, which must
// hold seqLen+1 values, and returns the label 0.
func (s *textSet) Example(i int, x []float32) (label int, err error) {
	if i < 0 || i >= s.Len() {
		return 0, fmt.Errorf("charrnn: example %d of %d", i, s.Len())
	}
	if len(x) != s.seqLen+1 {
		return 0, fmt.Errorf("charrnn: example of %d characters into %d values", s.seqLen+1, len(x))
	}
	for j := range x {
		x[j] = float32(s.ids[i*s.seqLen+j])
	}
	return 0, nil
}
