package main

import (
	"context"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// module is a module of one function, exported as "f", of type
// (i32) -> (), its body's code given (locals and end included).
func module(body ...byte) []byte {
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, 1, 5, 1, 0x60, 1, 0x7f, 0) // type: (i32) -> ()
	m = append(m, 3, 2, 1, 0)                // function 0 of type 0
	m = append(m, 7, 5, 1, 1, 'f', 0x00, 0)  // export "f": function 0
	code := appendULEB(nil, uint32(len(body)))
	code = append(code, body...)
	sec := append([]byte{1}, code...)
	m = append(m, 10)
	m = appendULEB(m, uint32(len(sec)))
	return append(m, sec...)
}

// countdown loops its parameter's times (at least once).
var countdown = module(0, // no locals
	0x03, 0x40, // loop
	0x20, 0, 0x41, 1, 0x6b, 0x22, 0, // local.get 0; i32.const 1; i32.sub; local.tee 0
	0x0d, 0, // br_if 0
	0x0b, 0x0b) // end; end

// forever never ends.
var forever = module(0, 0x03, 0x40, 0x0c, 0, 0x0b, 0x0b) // loop; br 0; end; end

func instantiate(t *testing.T, mod []byte) (api.Function, api.MutableGlobal) {
	t.Helper()
	fueled, err := AddFuel(mod)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	t.Cleanup(func() { rt.Close(ctx) })
	m, err := rt.Instantiate(ctx, fueled)
	if err != nil {
		t.Fatalf("the fueled module does not load: %v", err)
	}
	g, ok := m.ExportedGlobal(FuelExport).(api.MutableGlobal)
	if !ok {
		t.Fatal("no mutable fuel global exported")
	}
	return m.ExportedFunction("f"), g
}

// TestFuelCountsLoops: each time round a loop takes one, and a call
// with too little traps.
func TestFuelCountsLoops(t *testing.T) {
	f, fuel := instantiate(t, countdown)
	ctx := context.Background()
	fuel.Set(100)
	if _, err := f.Call(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if left := fuel.Get(); left != 90 {
		t.Errorf("10 times round a loop left %d of 100", left)
	}
	fuel.Set(9)
	if _, err := f.Call(ctx, 10); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("10 times round with fuel for 9: %v", err)
	}
	if left := fuel.Get(); left != 0 {
		t.Errorf("out of fuel, the gauge reads %d", left)
	}
}

// TestFuelEndsLoopThatNeverEnds: the loop the gauge is for.
func TestFuelEndsLoopThatNeverEnds(t *testing.T) {
	f, fuel := instantiate(t, forever)
	fuel.Set(1_000_000)
	if _, err := f.Call(context.Background(), 0); err == nil {
		t.Fatal("a loop that never ends returned")
	}
	if fuel.Get() != 0 {
		t.Errorf("the gauge reads %d", fuel.Get())
	}
}

// TestAddFuelRefusesWhatItCannotRead: an instruction it does not know
// (SIMD here) and damaged modules are errors, never passed over.
func TestAddFuelRefusesWhatItCannotRead(t *testing.T) {
	simd := module(0, 0xfd, 0x0c, 0x0b)
	cases := map[string][]byte{
		"simd":         simd,
		"not wasm":     []byte("\x7fELF\x02\x01\x01\x00"),
		"cut short":    countdown[:len(countdown)-3],
		"section size": append(append([]byte{}, countdown[:8]...), 1, 0xff, 0xff, 0xff, 0xff, 0x0f),
	}
	for name, mod := range cases {
		if _, err := AddFuel(mod); err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestAddFuelKeepsImportedGlobalsFirst: the gauge's index comes after
// the imported globals and the module's own.
func TestAddFuelKeepsImportedGlobalsFirst(t *testing.T) {
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, 2, 8, 1, 1, 'e', 1, 'g', 0x03, 0x7f, 0x00) // import e.g: an immutable i32
	m = append(m, 6, 6, 1, 0x7f, 0x01, 0x41, 0, 0x0b)        // one global of its own
	out, err := AddFuel(m)
	if err != nil {
		t.Fatal(err)
	}
	secs, err := sections(out[8:])
	if err != nil {
		t.Fatal(err)
	}
	var export []byte
	for _, s := range secs {
		if s.id == secExport {
			export = s.body
		}
	}
	want := append([]byte{1, 4}, "fuel"...)
	want = append(want, 0x03, 2)
	if string(export) != string(want) {
		t.Errorf("export section % x, want % x", export, want)
	}
}
