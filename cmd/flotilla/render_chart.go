package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/flotilla-gitops/flotilla/chartengine"
	"github.com/flotilla-gitops/flotilla/compose"
)

// chartFlags are the render flags that only a chart takes.
type chartFlags struct {
	// ValueFiles are relative to --path, merged in order over values.yaml.
	ValueFiles []string
	// Set are KEY=VALUE pairs with dotted keys, over everything else.
	Set []string
	// SetString are KEY=VALUE pairs whose value stays text ("2", "true").
	SetString []string
	// Revision is what templates see as .Release.Revision. Default 1.
	Revision int
}

func (c *chartFlags) add(f *pflag.FlagSet) {
	f.StringArrayVar(&c.ValueFiles, "values", nil, "chart values file relative to --path (repeatable, merged in order)")
	f.StringArrayVar(&c.Set, "set", nil, "chart value KEY=VALUE, KEY dotted (repeatable, highest precedence)")
	f.StringArrayVar(&c.SetString, "set-string", nil, "like --set, but VALUE is always text (repeatable)")
	f.IntVar(&c.Revision, "revision", 1, "release revision the chart's templates see")
}

// isChart reports whether dir is a chart directory.
func isChart(dir compose.Dir) bool {
	st, err := os.Stat(filepath.Join(dir.Root, dir.Path, chartengine.ChartFile))
	return err == nil && st.Mode().IsRegular()
}

// renderProject renders dir as a chart when it holds Chart.yaml and no
// compose file was named, and as a compose project otherwise.
func renderProject(stack string, dir compose.Dir, opts renderOptions) (*compose.Rendered, error) {
	chartOpts := len(opts.ValueFiles) > 0 || len(opts.Set) > 0 || len(opts.SetString) > 0
	if len(opts.Files) > 0 || !isChart(dir) {
		if chartOpts {
			return nil, usageError{errors.New("--values and --set need a chart: --path holds no Chart.yaml")}
		}
		return compose.Render(stack, dir)
	}
	if len(dir.EnvFiles) > 0 {
		return nil, usageError{errors.New("--env-file is for compose projects; a chart takes --values and --set")}
	}
	set, err := parseSetFlags(opts.Set, opts.SetString)
	if err != nil {
		return nil, usageError{err}
	}
	r, err := chartengine.Render(chartengine.Dir{
		Root: dir.Root, Path: dir.Path, ValueFiles: opts.ValueFiles, Set: set, Decrypt: dir.Decrypt,
		SealKey: dir.SealKey, Limits: dir.Limits,
	}, chartengine.Release{Name: stack, Revision: opts.Revision})
	if err != nil {
		return nil, err
	}
	return r.Rendered, nil
}

// parseSetFlags reads KEY=VALUE pairs, --set-string after --set; a later
// pair for the same key wins.
func parseSetFlags(set, setString []string) (map[string]any, error) {
	out := map[string]any{}
	for i, pairs := range [][]string{set, setString} {
		flag := []string{"--set", "--set-string"}[i]
		for _, p := range pairs {
			k, v, ok := strings.Cut(p, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("%s %q: want KEY=VALUE", flag, p)
			}
			if _, err := chartengine.SplitKey(k); err != nil {
				return nil, fmt.Errorf("%s: %w", flag, err)
			}
			if i == 0 {
				out[k] = chartengine.ParseSetValue(v)
			} else {
				out[k] = v
			}
		}
	}
	return out, nil
}
