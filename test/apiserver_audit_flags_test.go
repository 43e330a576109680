package test

import (
	"fmt"
	"slices"
	"time"
)

func oneOf(values ...string) func(string) error {
	return func(s string) error {
		if !slices.Contains(values, s) {
			return fmt.Errorf("%q is not one of %v", s, values)
		}
		return nil
	}
}

// positive checks that a flag's value parses and is above zero.
func positive[T int | float64 | time.Duration](parse func(string) (T, error)) func(string) error {
	return func(s string) error {
		v, err := parse(s)
		if err == nil && v <= 0 {
			err = fmt.Errorf("%v is not positive", v)
		}
		return err
	}
}
