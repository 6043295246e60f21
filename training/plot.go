package training

import (
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// PlotMetrics draws training loss and test accuracy against steps (top) and
// seconds (bottom) as a PNG image into w.
func PlotMetrics(w io.Writer, metrics []Row) error {
	panel := func(title, xlabel, ylabel, kind string, x func(Row) float64, y func(Row) float64, c color.Color) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = xlabel
		p.Y.Label.Text = ylabel
		var pts plotter.XYs
		for _, m := range metrics {
			if m.Kind == kind && !m.NoLoss {
				pts = append(pts, plotter.XY{X: x(m), Y: y(m)})
			}
		}
		if len(pts) > 0 {
			l, err := plotter.NewLine(pts)
			if err != nil {
				return nil, err
			}
			l.Color = c
			p.Add(l)
			if len(pts) < 30 {
				s, err := plotter.NewScatter(pts)
				if err != nil {
					return nil, err
				}
				s.Color = c
				p.Add(s)
			}
		}
		return p, nil
	}
	step := func(m Row) float64 { return float64(m.Step) }
	secs := func(m Row) float64 { return m.Seconds }
	loss := func(m Row) float64 { return m.Loss }
	acc := func(m Row) float64 { return 100 * m.Accuracy }
	blue, red := color.RGBA{31, 119, 180, 255}, color.RGBA{214, 39, 40, 255}
	specs := []struct {
		title, xl, yl, kind string
		x, y                func(Row) float64
		c                   color.Color
	}{
		{"training loss", "step", "loss", "train", step, loss, blue},
		{"test accuracy", "step", "%", "test", step, acc, red},
		{"training loss", "seconds", "loss", "train", secs, loss, blue},
		{"test accuracy", "seconds", "%", "test", secs, acc, red},
	}
	plots := make([][]*plot.Plot, 2)
	for i, s := range specs {
		p, err := panel(s.title, s.xl, s.yl, s.kind, s.x, s.y, s.c)
		if err != nil {
			return err
		}
		plots[i/2] = append(plots[i/2], p)
	}
	return WritePNG(w, 10*vg.Inch, 7*vg.Inch, plots)
}

// WritePNG draws plots, rows of panels, as a PNG image of the given size
// into w.
func WritePNG(w io.Writer, width, height vg.Length, plots [][]*plot.Plot) error {
	img := vgimg.New(width, height)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: len(plots[0]), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		for j := range plots[i] {
			plots[i][j].Draw(canvases[i][j])
		}
	}
	_, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w)
	return err
}
