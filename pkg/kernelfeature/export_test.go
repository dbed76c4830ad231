package kernelfeature

// Verdict exposes verdict to the external test package.
var Verdict = verdict
