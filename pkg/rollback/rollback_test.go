package rollback

import (
	"errors"
	"reflect"
	"testing"
)

func TestRunReverseOrderKeepsGoing(t *testing.T) {
	var s Stack
	var order []string
	s.Push("a", func() error { order = append(order, "a"); return nil })
	s.Push("b", func() error { order = append(order, "b"); return errors.New("b failed") })
	s.Push("c", func() error { order = append(order, "c"); return nil })
	errs := s.Run(nil)
	if !reflect.DeepEqual(order, []string{"c", "b", "a"}) {
		t.Errorf("order %v, want c b a", order)
	}
	if len(errs) != 1 || errs[0].Error() != "undo b: b failed" {
		t.Errorf("errs %v", errs)
	}
	if s.Len() != 0 {
		t.Error("stack not emptied")
	}
	if errs := s.Run(nil); len(errs) != 0 || len(order) != 3 {
		t.Error("second Run must do nothing")
	}
}

func TestRunSurvivesPanickingStep(t *testing.T) {
	var s Stack
	ran := false
	s.Push("a", func() error { ran = true; return nil })
	s.Push("b", func() error { panic("boom") })
	errs := s.Run(nil)
	if !ran {
		t.Error("the step before the panicking one did not run")
	}
	if len(errs) != 1 || errs[0].Error() != "undo b: panic: boom" {
		t.Errorf("errs %v", errs)
	}
}
