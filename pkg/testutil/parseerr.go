package testutil

// ParseErr adapts a config parser to the func(stdin) error that
// CheckWrongTypes and the like call: it parses stdin and keeps only the
// error.
func ParseErr[C any](parse func(stdin []byte) (C, error)) func(stdin []byte) error {
	return func(stdin []byte) error {
		_, err := parse(stdin)
		return err
	}
}

// ParseErrWith is ParseErr for a parser that takes one more argument
// (CNI_ARGS, say): each call passes arg.
func ParseErrWith[C, A any](parse func(stdin []byte, arg A) (C, error), arg A) func(stdin []byte) error {
	return func(stdin []byte) error {
		_, err := parse(stdin, arg)
		return err
	}
}
