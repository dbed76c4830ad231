package iptables

import (
	"regexp"
	"sync"
)

// lazyRE is a regular expression compiled on first use. The package's
// expressions parse iptables-save output, which most commands never read;
// compiled at init they cost every exec of every plugin linking this
// package (all of them, through pkg/attach) about 650 allocations before
// main. A malformed expression still panics, on first use.
type lazyRE struct {
	expr string
	once sync.Once
	re   *regexp.Regexp
}

func NewLazyRE(expr string) *lazyRE { return &lazyRE{expr: expr} }

func (l *lazyRE) get() *regexp.Regexp {
	l.once.Do(func() { l.re = regexp.MustCompile(l.expr) })
	return l.re
}

func (l *lazyRE) MatchString(s string) bool { return l.get().MatchString(s) }

func (l *lazyRE) FindStringSubmatch(s string) []string { return l.get().FindStringSubmatch(s) }

func (l *lazyRE) FindAllStringSubmatch(s string, n int) [][]string {
	return l.get().FindAllStringSubmatch(s, n)
}

func (l *lazyRE) String() string { return l.expr }
