package main

import (
	"fmt"
	"image/color"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

var toolColor = map[string]color.Color{
	"docker":   color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"flotilla": color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
}

// drawPlots writes, per workload, time and Docker requests against size,
// and the steady run's goroutines, heap and RSS over time.
func drawPlots(dir string, rows []row, st *steadyResult) error {
	for _, w := range []struct{ name, x string }{{"services", "services in the stack"}, {"applications", "applications (5 services each)"}} {
		for _, m := range []struct {
			file, y string
			get     func(row) float64
		}{
			{"time", "wall time (s)", func(r row) float64 { return r.Seconds }},
			{"cpu", "user+system CPU (s)", func(r row) float64 { return r.CPU }},
			{"requests", "Docker API requests", func(r row) float64 { return float64(r.Requests) }},
		} {
			if err := costPlot(filepath.Join(dir, fmt.Sprintf("%s-%s.png", w.name, m.file)), w.name, w.x, m.y, rows, m.get); err != nil {
				return err
			}
		}
	}
	if st != nil && len(st.Samples) > 1 {
		return steadyPlot(filepath.Join(dir, "steady.png"), st)
	}
	return nil
}

func costPlot(file, workload, xlabel, ylabel string, rows []row, get func(row) float64) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %s against size", workload, ylabel)
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.Left = true
	n := 0
	for _, tool := range []string{"docker", "flotilla"} {
		for si, step := range []string{"first deploy", "unchanged redeploy", "one-service change"} {
			var pts plotter.XYs
			for _, r := range rows {
				if r.Workload == workload && r.Tool == tool && r.Step == step {
					pts = append(pts, plotter.XY{X: float64(r.Size), Y: get(r)})
				}
			}
			if len(pts) == 0 {
				continue
			}
			l, s, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			l.Color, s.Color = toolColor[tool], toolColor[tool]
			l.Dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}}[si]
			p.Add(l, s)
			p.Legend.Add(tool+" "+step, l, s)
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, file)
}

func steadyPlot(file string, st *steadyResult) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("steady run, %d applications: controller over time", st.Apps)
	p.X.Label.Text = "seconds since start"
	p.Y.Label.Text = "MB, or goroutines / 10"
	p.Legend.Top = true
	series := []struct {
		name string
		c    color.Color
		get  func(sample) float64
	}{
		{"RSS (MB)", color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, func(s sample) float64 { return s.RSSMB }},
		{"heap in use (MB)", color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, func(s sample) float64 { return s.HeapMB }},
		{"goroutines / 10", color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, func(s sample) float64 { return s.Goroutines / 10 }},
	}
	for _, se := range series {
		pts := make(plotter.XYs, len(st.Samples))
		for i, s := range st.Samples {
			pts[i] = plotter.XY{X: s.At.Seconds(), Y: se.get(s)}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = se.c
		p.Add(l)
		p.Legend.Add(se.name, l)
	}
	top := 0.0
	for _, s := range st.Samples {
		top = max(top, s.RSSMB, s.HeapMB, s.Goroutines/10)
	}
	p.Y.Min, p.Y.Max = 0, top*1.35 // room for the legend above the lines
	return p.Save(7*vg.Inch, 4.5*vg.Inch, file)
}
