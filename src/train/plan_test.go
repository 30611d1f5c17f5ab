package train

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"sancus/collectives"
)

// TestResolveKeepsTheLinksChoice: ranks that share no memory (a btl list
// without shared memory) measure their link and choose a width, which a
// checkpoint directory keeps; a run resumed there sends as the first did,
// without measuring, on every rank, and a kept value that no link would
// choose (auto, or none) is measured afresh. Two in-process ranks measure
// memory, at a rate that depends on the load: each run is held to what
// WireForLink makes of the rate it measured.
func TestResolveKeepsTheLinksChoice(t *testing.T) {
	t.Setenv("OMPI_MCA_btl", "tcp,self")
	dir := t.TempDir()
	kept := filepath.Join(dir, "wire-choice")
	choose := func() ([]string, []Plan) {
		t.Helper()
		wires, plans := make([]string, 2), make([]Plan, 2)
		err := collectives.NewWorld(2, time.Minute).Run(func(c collectives.Comm) error {
			cfg := Defaults()
			cfg.Run.CheckpointDir, cfg.Wire.FromLink = dir, true
			p, err := Resolve(cfg, c)
			wires[c.Rank()], plans[c.Rank()] = p.Wire.Fwd.String(), p
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return wires, plans
	}
	read := func() string {
		t.Helper()
		b, err := os.ReadFile(kept)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	measured := func(what string, wires []string, plans []Plan) {
		t.Helper()
		f, _ := WireForLink(plans[0].Link.GBs)
		want := f.String()
		if plans[0].Link.GBs <= 0 || wires[0] != want || wires[1] != want || read() != want || plans[0].Wire.Grad != f {
			t.Fatalf("%s: wires %q, measured %g GB/s, kept %q, gradients %v; want %s measured, kept and for gradients too", what, wires, plans[0].Link.GBs, read(), plans[0].Wire.Grad, want)
		}
	}
	wires, plans := choose()
	measured("first run", wires, plans)
	if err := os.WriteFile(kept, []byte("int2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wires, plans = choose()
	for r := range 2 {
		if wires[r] != "int2" || plans[r].Link.GBs != 0 || !strings.Contains(plans[r].Link.Chosen, "keeps from the run this continues") {
			t.Fatalf("resumed, rank %d: wire %q, measured %g GB/s, said %q; want the kept int2, unmeasured", r, wires[r], plans[r].Link.GBs, plans[r].Link.Chosen)
		}
	}
	for _, bad := range []string{"auto", "", "int3"} {
		if err := os.WriteFile(kept, []byte(bad+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		wires, plans = choose()
		measured("kept "+bad, wires, plans)
	}
}

// TestResolveAppliesTheDefaults: a library caller of New gets the bound,
// formats and clip scale the command gets.
func TestResolveAppliesTheDefaults(t *testing.T) {
	cfg := Defaults()
	cfg.Staleness.Policy = kind("variation-gap")
	var plans [2]Plan
	err := collectives.NewWorld(2, time.Minute).Run(func(c collectives.Comm) error {
		var err error
		plans[c.Rank()], err = Resolve(cfg, c)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	p := plans[0]
	if p.Staleness.Eps != 0.03 || p.policy.Name() != "variation-gap(0.03),cap=10" || p.Wire.Fwd != 32 || p.Wire.Grad != 32 ||
		p.Wire.Allreduce != 32 || p.Optim.ClipScale != 1.4142135623730951 || p.P != 2 {
		t.Fatalf("resolved: %+v, policy %s", p, p.policy.Name())
	}
}

// TestSignatureIsThePlan: every setting of the Plan is part of the
// checkpoint signature, a new one included, except those listed as
// unable to change a weight.
func TestSignatureIsThePlan(t *testing.T) {
	base := Plan{Config: Defaults(), P: 2}
	skip := map[string]bool{}
	for _, p := range unsigned {
		skip[p] = true
	}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		for i := 0; i < v.NumField(); i++ {
			f, fv := v.Type().Field(i), v.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			p := strings.TrimPrefix(path+"."+name, ".")
			if f.Anonymous {
				p = path
			}
			if fv.Kind() == reflect.Struct && !fv.CanInterface() {
				continue
			}
			if _, ok := fv.Interface().(interface{ MarshalText() ([]byte, error) }); !ok && fv.Kind() == reflect.Struct {
				walk(fv, p)
				continue
			}
			before := base.Signature()
			old := reflect.ValueOf(fv.Interface())
			switch fv.Kind() {
			case reflect.Bool:
				fv.SetBool(!fv.Bool())
			case reflect.Int, reflect.Int64, reflect.Int32:
				fv.SetInt(fv.Int() + 1)
			case reflect.Uint8, reflect.Uint64:
				fv.SetUint(fv.Uint() + 1)
			case reflect.Float64:
				fv.SetFloat(fv.Float() + 0.5)
			case reflect.String:
				fv.SetString(fv.String() + "x")
			case reflect.Slice:
				if fv.Type().Elem().Kind() != reflect.Int {
					continue
				}
				fv.Set(reflect.Append(fv, reflect.ValueOf(1)))
			default:
				continue // funcs and interfaces are not settings
			}
			signed := true
			for q := p; q != ""; q, _ = cutLast(q) {
				signed = signed && !skip[q]
			}
			if changed := base.Signature() != before; changed != signed {
				t.Errorf("%s: the signature changed %v with it, want %v (list it in unsigned if it cannot change a weight)", p, changed, signed)
			}
			fv.Set(old)
		}
	}
	walk(reflect.ValueOf(&base).Elem(), "")
	if got := (Plan{Config: Defaults(), P: 2}).Signature(); got != base.Signature() {
		t.Fatal("the walk left the plan changed")
	}
}

// cutLast is a path less its last element.
func cutLast(p string) (string, bool) {
	i := strings.LastIndexByte(p, '.')
	if i < 0 {
		return "", false
	}
	return p[:i], true
}
