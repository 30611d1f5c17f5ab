package train

import (
	"sancus/collectives/wire"
	"sancus/src/staleness"
)

// kind and format are a policy and a wire format by name, for the tests'
// tables.
func kind(s string) staleness.Kind {
	k, err := staleness.ParseKind(s)
	if err != nil {
		panic(err)
	}
	return k
}

func format(s string) wire.Format {
	f, err := wire.ParseFormat(s)
	if err != nil {
		panic(err)
	}
	return f
}
