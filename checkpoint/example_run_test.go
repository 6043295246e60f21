package checkpoint_test

import (
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/orthonet/orthonet/checkpoint"
)

// ExampleRun keeps a run's checkpoints in a folder: it saves every 10
// steps, keeps the newest two, marks step 20 best and writes a notes file.
// A file the run did not write stays untouched. Going on from the older
// checkpoint of step 40 starts a new run that records where it came from.
func ExampleRun() {
	root, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(root)
	run, err := checkpoint.CreateRun(filepath.Join(root, "run-1"), nil)
	if err != nil {
		log.Fatal(err)
	}
	// A user's file that only looks like a checkpoint.
	_ = os.WriteFile(filepath.Join(run.Dir(), "step-000000001.safetensors"), []byte("mine"), 0o644)

	for step := 10; step <= 50; step += 10 {
		f := checkpoint.New()
		f.Tensors["w"] = checkpoint.Tensor{Shape: []int{1}, Data: []float64{float64(step)}}
		if _, err := run.Save(step, f); err != nil {
			log.Fatal(err)
		}
		if step == 20 {
			if err := run.MarkBest(step); err != nil {
				log.Fatal(err)
			}
		}
		if err := run.Prune(2); err != nil {
			log.Fatal(err)
		}
	}
	err = run.WriteFile("notes.txt", func(w io.Writer) error {
		_, err := io.WriteString(w, "lr 0.1\n")
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	// Later: open the folder again (the lock, held until Close, keeps a
	// second writer out).
	if err := run.Close(); err != nil {
		log.Fatal(err)
	}
	r, err := checkpoint.OpenRun(filepath.Join(root, "run-1"))
	if err != nil {
		log.Fatal(err)
	}
	path, step, _ := r.Latest()
	fmt.Println("latest:", filepath.Base(path), step)
	fmt.Println("checkpoints:", r.Checkpoints())
	_, best, _ := r.Best()
	fmt.Println("best:", best)
	ents, _ := os.ReadDir(r.Dir())
	for _, e := range ents {
		fmt.Println(" ", e.Name())
	}

	child, err := checkpoint.CreateRun(filepath.Join(root, "run-2"),
		&checkpoint.Origin{Path: filepath.Join(r.Dir(), checkpoint.StepName(40)), Step: 40, Run: r.ID()})
	if err != nil {
		log.Fatal(err)
	}
	p := child.Parent()
	fmt.Println("run-2 goes on from", filepath.Base(p.Path), "of run-1:", p.Run == r.ID())
	// Output:
	// latest: step-000000050.safetensors 50
	// checkpoints: [40 50]
	// best: 20
	//   best.safetensors
	//   notes.txt
	//   run.json
	//   run.lock
	//   step-000000001.safetensors
	//   step-000000040.safetensors
	//   step-000000050.safetensors
	// run-2 goes on from step-000000040.safetensors of run-1: true
}
