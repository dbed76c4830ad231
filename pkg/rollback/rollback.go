// Package rollback is the undo stack every ADD keeps: each step that changes
// the kernel or the disk pushes its undo right after it succeeds, and a
// failure later in ADD runs the undos in reverse order.
package rollback

import (
	"fmt"
	"log/slog"
)

type step struct {
	name string
	fn   func() error
}

// Stack holds undo steps. The zero value is ready to use.
type Stack struct {
	steps []step
}

// Push registers the undo for something that now exists.
func (s *Stack) Push(name string, fn func() error) {
	s.steps = append(s.steps, step{name: name, fn: fn})
}

// Len reports how many undo steps are registered.
func (s *Stack) Len() int { return len(s.steps) }

// Run runs every undo in reverse order, logging (never returning) their
// failures, so the error that caused the rollback stays the one reported.
// A step that panics counts as failed and the others still run. It returns
// the failures too, for tests.
func (s *Stack) Run(log *slog.Logger) []error {
	var errs []error
	for i := len(s.steps) - 1; i >= 0; i-- {
		st := s.steps[i]
		if err := st.run(); err != nil {
			err = fmt.Errorf("undo %s: %w", st.name, err)
			errs = append(errs, err)
			if log != nil {
				log.Warn("rollback step failed", "step", st.name, "err", err)
			}
		}
	}
	s.steps = nil
	return errs
}

// run calls the undo, turning a panic into its error.
func (st step) run() (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return st.fn()
}
