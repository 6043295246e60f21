package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTimeLimit trains with -time-limit and -eval-interval and checks
// that the run stops once its training time (steps only) passes the limit,
// long before its epochs, with a test evaluation there and one at each
// interval of training time; that a resume with the same limit has nothing
// to do; and that a resume with a larger limit trains on to it.
func TestTimeLimit(t *testing.T) {
	dir, out := mnistDir(t, 3000, 100), t.TempDir()
	args := []string{"-dataset", "mnist", "-data", dir, "-out", out, "-hidden", "32", "-depth", "2", "-r", "8",
		"-batch", "10", "-epochs", "100000", "-eval-every", "-1", "-save-every", "0",
		"-time-limit", "300ms", "-eval-interval", "50ms"}
	c, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if err := run(context.Background(), c, &log, hooks{}); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "time limit: 300ms of training reached") {
		t.Fatalf("no time-limit line in the log:\n%s", log.String())
	}
	tests := testRows(t, out)
	last := tests[len(tests)-1]
	if last.train < 0.3 || last.train > 2 {
		t.Errorf("the last evaluation is at %.3f s of training, want just past 0.3", last.train)
	}
	if last.epoch > 1000 {
		t.Errorf("the run reached epoch %d of 100000", last.epoch)
	}
	// One evaluation at each 50 ms of training (several may fall together
	// after a slow step), each after the time it marks.
	if len(tests) < 4 {
		t.Errorf("%d test evaluations over 300 ms of training every 50 ms, want at least 4", len(tests))
	}
	for i := 1; i < len(tests); i++ { // (an epoch's end and an interval may be a step apart)
		if tests[i].step <= tests[i-1].step || tests[i].train < tests[i-1].train || tests[i].examples != 100 {
			t.Errorf("evaluation %d: step %d at %.3f s after step %d at %.3f s, %d examples; want later, on the whole test set",
				i, tests[i].step, tests[i].train, tests[i-1].step, tests[i-1].train, tests[i].examples)
		}
	}

	log.Reset()
	c, err = parseFlags(append(args, "-resume", "latest"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), c, &log, hooks{}); err != nil || !strings.Contains(log.String(), "nothing to do") {
		t.Fatalf("resume at the limit: %v\n%s", err, log.String())
	}
	log.Reset()
	c, err = parseFlags(append(args, "-resume", "latest", "-time-limit", "600ms"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), c, &log, hooks{}); err != nil {
		t.Fatalf("resume with a larger limit: %v\n%s", err, log.String())
	}
	more := testRows(t, out)
	if end := more[len(more)-1]; end.train < 0.6 || end.step <= last.step {
		t.Errorf("after resuming with -time-limit 600ms the run ends at %.3f s of training, step %d (was step %d)", end.train, end.step, last.step)
	}
}

type testRow struct {
	epoch, step, examples int
	train                 float64
}

// testRows returns the test rows of the newest run's metrics.csv under out.
func testRows(t *testing.T, out string) []testRow {
	t.Helper()
	runs, _ := filepath.Glob(filepath.Join(out, "run-*", "metrics.csv"))
	if len(runs) == 0 {
		t.Fatal("no metrics.csv")
	}
	b, err := os.ReadFile(runs[len(runs)-1])
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out2 []testRow
	for _, r := range rows[1:] {
		if r[0] != "test" {
			continue
		}
		var tr testRow
		tr.epoch, _ = strconv.Atoi(r[1])
		tr.step, _ = strconv.Atoi(r[2])
		tr.examples, _ = strconv.Atoi(r[7])
		tr.train, _ = strconv.ParseFloat(r[9], 64)
		out2 = append(out2, tr)
	}
	if len(out2) == 0 {
		t.Fatal("no test rows in metrics.csv")
	}
	return out2
}
