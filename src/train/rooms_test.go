package train

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"testing"
)

// rooms are the engine's floors, lowest first (doc.go), and names each may
// not use: a room reaches down, never up. The exchange knows caches and
// blocks, not the layers that fill them nor the optimizer they feed; the
// site answers a layer's questions without the epoch loop, the optimizer
// or checkpoints; the layer kinds see the engine only through a layerSite.
var rooms = []struct {
	name      string
	files     []string
	forbidden []string
}{
	{"exchange", []string{"exchange.go", "sparse.go", "reduce.go", "wire.go"},
		[]string{"layer", "conv", "localLayer", "transformLayer", "aggregateLayer", "sageLayer", "sageLocalLayer", "gatLayer",
			"pass", "act", "layers", "layerSite", "opt", "ar", "skips", "weights", "Run", "saveCheckpoint"}},
	{"site", []string{"site.go", "sancus.go", "drift.go"},
		[]string{"layers", "opt", "ar", "skips", "Run", "saveCheckpoint", "batchEpoch", "trainStep"}},
	{"layers", []string{"layers.go", "sage.go", "gat.go", "activation.go"},
		[]string{"Engine"}},
}

// TestRoomsReachOnlyDown refuses a name a room may not use: a layer file
// naming *Engine (a parameter, a receiver, a conversion), the exchange
// naming a layer, the optimizer or the run.
func TestRoomsReachOnlyDown(t *testing.T) {
	for _, r := range rooms {
		for _, f := range r.files {
			for _, u := range namesUsed(t, f, r.forbidden) {
				t.Errorf("%s (the %s room) uses %s, which is above it: pass what it needs down (site.go), or move the code to the room that may", u.at, r.name, u.name)
			}
		}
	}
}

// TestRoomCheckSees keeps the check above honest: it finds *Engine where
// a layer file would take it.
func TestRoomCheckSees(t *testing.T) {
	src := "package train\nfunc (L *localLayer) f(e *Engine) {}\n"
	got := identsIn(t, "layers_bad.go", src, []string{"Engine"})
	if len(got) != 1 || got[0].name != "Engine" {
		t.Fatalf("a layer method taking *Engine was not seen: %v", got)
	}
}

type use struct{ name, at string }

func namesUsed(t *testing.T, file string, forbidden []string) []use {
	t.Helper()
	return identsIn(t, filepath.Join(".", file), nil, forbidden)
}

func identsIn(t *testing.T, file string, src any, forbidden []string) []use {
	t.Helper()
	fs := token.NewFileSet()
	f, err := parser.ParseFile(fs, file, src, 0)
	if err != nil {
		t.Fatalf("%s: %v (a room names a file the package no longer has? update rooms in rooms_test.go and doc.go)", file, err)
	}
	var out []use
	ast.Inspect(f, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && slices.Contains(forbidden, id.Name) {
			out = append(out, use{id.Name, fs.Position(id.Pos()).String()})
		}
		return true
	})
	return out
}
