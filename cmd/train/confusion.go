package main

import (
	"fmt"
	"github.com/orthonet/orthonet/training"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// confusionGrid is a confusion matrix as a heat map's grid: column c, row
// r is the share of true class k = classes-1-r predicted as c (the first
// class at the top).
type confusionGrid struct {
	m     confusion
	share [][]float64
}

func newConfusionGrid(m confusion) confusionGrid {
	g := confusionGrid{m: m, share: make([][]float64, len(m))}
	for k, row := range m {
		total := 0
		for _, v := range row {
			total += v
		}
		g.share[k] = make([]float64, len(row))
		for j, v := range row {
			if total > 0 {
				g.share[k][j] = float64(v) / float64(total)
			}
		}
	}
	return g
}

func (g confusionGrid) Dims() (c, r int)   { return len(g.m), len(g.m) }
func (g confusionGrid) Z(c, r int) float64 { return g.share[len(g.m)-1-r][c] }
func (g confusionGrid) X(c int) float64    { return float64(c) }
func (g confusionGrid) Y(r int) float64    { return float64(r) }

// plotConfusion draws the confusion matrix as a PNG: each true class's row
// shaded by the share of its images predicted as each class, with the
// counts written in the cells.
func plotConfusion(w io.Writer, m confusion, classes []string) error {
	k := len(m)
	p := plot.New()
	p.Title.Text = "confusion matrix (rows: true class, shade: share of the row)"
	p.X.Label.Text = "predicted"
	p.Y.Label.Text = "true"
	grid := newConfusionGrid(m)
	hm := plotter.NewHeatMap(grid, palette.Reverse(moreland.ExtendedBlackBody()).Palette(255))
	hm.Min, hm.Max = 0, 1
	p.Add(hm)
	var pts plotter.XYs
	var labels []string
	for r := 0; r < k; r++ {
		for c := 0; c < k; c++ {
			pts = append(pts, plotter.XY{X: float64(c), Y: float64(r)})
			labels = append(labels, fmt.Sprint(m[k-1-r][c]))
		}
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: pts, Labels: labels})
	if err != nil {
		return err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = -0.5, -0.5
		if share := grid.Z(i%k, i/k); share > 0.5 {
			l.TextStyle[i].Color = color.White
		}
	}
	p.Add(l)
	p.NominalX(classes...)
	rev := make([]string, k)
	for i, name := range classes {
		rev[k-1-i] = name
	}
	p.NominalY(rev...)
	side := vg.Length(max(6, k)) * vg.Inch * 0.9
	return training.WritePNG(w, side+2*vg.Inch, side, [][]*plot.Plot{{p}})
}
