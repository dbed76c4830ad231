package testutil

import (
	"encoding/json"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// AtLeast reports whether spec version ver is min or later.
func AtLeast(ver, min string) bool {
	ginkgo.GinkgoHelper()
	ok, err := version.GreaterThanOrEqualTo(ver, min)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return ok
}

// ParseResult reads a result a plugin printed for a config of spec version
// ver, checks that it is in that version, and returns it converted to the
// current version.
func ParseResult(ver string, stdout []byte) *current.Result {
	ginkgo.GinkgoHelper()
	res, err := version.NewResult(ver, stdout)
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "%s", stdout)
	gomega.Expect(res.Version()).To(gomega.Equal(ver))
	cur, err := current.NewResultFromResult(res)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return cur
}

// WithPrev returns conf with prev (the stdout of an ADD, as a runtime caches
// it) added as prevResult, for CHECK and chained plugins.
func WithPrev(conf, prev []byte) []byte {
	ginkgo.GinkgoHelper()
	var m map[string]any
	gomega.Expect(json.Unmarshal(conf, &m)).To(gomega.Succeed())
	var p map[string]any
	gomega.Expect(json.Unmarshal(prev, &p)).To(gomega.Succeed())
	m["prevResult"] = p
	b, err := json.Marshal(m)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return b
}

// PrintResult returns res as a plugin of spec version ver prints it: what
// a runtime caches and passes on as prevResult.
func PrintResult(res *current.Result, ver string) []byte {
	ginkgo.GinkgoHelper()
	r, err := res.GetAsVersion(ver)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	b, err := json.Marshal(r)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return b
}

// JoinConf returns the config whose members are head, then keys (JSON
// members without braces; "" for none), then prev as prevResult (nil for
// none): how a chained plugin's specs write a config in one line.
func JoinConf(head, keys string, prev []byte) []byte {
	s := "{" + head
	if keys != "" {
		s += ", " + keys
	}
	if prev != nil {
		s += `, "prevResult": ` + string(prev)
	}
	return []byte(s + "}")
}

// MarshalConf is JoinConf with conf (not empty) as the head: conf as
// JSON, then keys, then prev as prevResult.
func MarshalConf(conf map[string]any, keys string, prev []byte) []byte {
	ginkgo.GinkgoHelper()
	b, err := json.Marshal(conf)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return JoinConf(string(b[1:len(b)-1]), keys, prev)
}
