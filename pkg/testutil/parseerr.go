package testutil

// ParseErr adapts a plugin's config parser to CheckWrongTypes, which looks
// only at the error.
func ParseErr[T any](parse func(stdin []byte) (T, error)) func(stdin []byte) error {
	return func(stdin []byte) error {
		_, err := parse(stdin)
		return err
	}
}

// ParseErrArgs is ParseErr for a parser that also takes CNI_ARGS; it passes
// cniArgs.
func ParseErrArgs[T any](parse func(stdin []byte, cniArgs string) (T, error), cniArgs string) func(stdin []byte) error {
	return func(stdin []byte) error {
		_, err := parse(stdin, cniArgs)
		return err
	}
}
