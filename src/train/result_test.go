package train

import (
	"encoding/json"
	"reflect"
	"sancus/src/model"
	"testing"

	"sancus/src/result"
)

// TestSettingsReadConfig: every field a report reads from a run's
// configuration exists in Config under the same name, and a written run
// reads back with those fields set (so their JSON types agree).
func TestSettingsReadConfig(t *testing.T) {
	ct := reflect.TypeFor[Config]()
	st := reflect.TypeFor[result.Settings]()
	for i := range st.NumField() {
		f := st.Field(i)
		cf, ok := ct.FieldByName(f.Name)
		if !ok || cf.Tag.Get("json") != f.Tag.Get("json") {
			t.Errorf("result.Settings.%s has no Config field of that name and tag", f.Name)
		}
	}
	cfg := Defaults()
	cfg.Staleness, cfg.Eps, cfg.MaxStale, cfg.Batch, cfg.ClustersPerStep, cfg.Wire, cfg.Model = "variation-gap", 0.03, 7, "clusters", 4, "int4", model.ArchSAGE
	b, err := json.Marshal(result.Run{Dataset: "d", Config: cfg, Result: &result.Result{Ranks: 2}})
	if err != nil {
		t.Fatal(err)
	}
	var r result.Run
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	want := result.Settings{Model: "sage", Staleness: "variation-gap", Eps: 0.03, MaxStale: 7, Batch: "clusters", ClustersPerStep: 4, Wire: "int4"}
	if r.Settings != want || r.Result.Ranks != 2 {
		t.Fatalf("read back %+v, ranks %d; want %+v", r.Settings, r.Result.Ranks, want)
	}
	var back Config
	if err := json.Unmarshal(r.Config.(json.RawMessage), &back); err != nil || back.Hidden != cfg.Hidden {
		t.Fatalf("raw config: %v, hidden %d", err, back.Hidden)
	}
}
