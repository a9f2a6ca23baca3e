package semantic

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// The grammars' modules, built from their C sources by
// scripts/build-parsers: tree-sitter parses hostile files there, under
// wazero, its memory capped and its time bounded by its fuel (a budget of
// loop iterations, taken away at the parse's deadline), so that a parser
// that crashes, loops or runs out of memory fails that file only. Pure Go: a
// build without cgo, and the Mac's, parse too.
//
//go:embed wasm/*.wasm
var modules embed.FS

const (
	// maxParserMemory caps one parser instance's memory: the largest
	// side, 1 MiB, needs about 40 MiB to parse and lay out in records
	// (C++, the largest grammar); hostile input made to blow tree-sitter's
	// stacks up gets six times that before it fails.
	maxParserMemory = 256 << 20
	// keepParserMemory is the most memory an idle instance keeps: one that
	// grew more on a large file is dropped, not pooled.
	keepParserMemory = 32 << 20
	wasmPage         = 64 << 10
	// Fuel is the loop iterations a call may run (internal/wasmfuel):
	// parsing takes 30 to 55 a byte of ordinary code; a parse stops at
	// its deadline, when its fuel is taken away, and a call without one
	// (the constructors, alloc, release) after seconds, not never.
	// wazero's own way to stop a call (WithCloseOnContextDone) is an
	// indirect call at each loop's header: parses took 3 times as long.
	fuelBase    = 50_000_000
	fuelPerByte = 200
)

// parsers runs the grammars of this process. Tests replace it for one with
// a smaller memory cap.
var parsers = newEngine(maxParserMemory)

// engine runs the grammars' modules in one wazero runtime, compiling each
// module the first time its language is parsed.
type engine struct {
	memory uint32 // the cap, in bytes
	// fuel is a call's budget of loop iterations for a source of n
	// bytes (a test's is smaller).
	fuel func(n int) uint64
	once sync.Once
	rt   wazero.Runtime
	err  error

	mu       sync.Mutex
	grammars map[string]*grammar
}

func newEngine(memory uint32) *engine {
	return &engine{memory: memory, fuel: defaultFuel, grammars: map[string]*grammar{}}
}

// grammar is one language's compiled module, its names and its idle
// instances.
type grammar struct {
	file     string
	once     sync.Once
	compiled wazero.CompiledModule
	names    *grammarNames
	err      error

	mu   sync.Mutex
	idle []*instance
}

func defaultFuel(n int) uint64 { return fuelBase + fuelPerByte*uint64(n) }

// instance is one instantiation of a grammar's module: it parses one file
// at a time.
type instance struct {
	mod                   api.Module
	alloc, release, parse api.Function
	fuel                  api.MutableGlobal
}

func (e *engine) start() error {
	e.once.Do(func() {
		ctx := context.Background()
		cfg := wazero.NewRuntimeConfig().WithMemoryLimitPages(e.memory / wasmPage)
		e.rt = wazero.NewRuntimeWithConfig(ctx, cfg)
		// tree-sitter's C library imports a clock and stderr: WASI with
		// nothing configured gives a fake clock, no files and no output.
		if _, err := wasi_snapshot_preview1.Instantiate(ctx, e.rt); err != nil {
			e.err = fmt.Errorf("start the parsers' runtime: %w", err)
		}
	})
	return e.err
}

// grammar returns the grammar in file (python.wasm ...), compiled.
func (e *engine) grammar(file string) (*grammar, error) {
	if err := e.start(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	g := e.grammars[file]
	if g == nil {
		g = &grammar{file: file}
		e.grammars[file] = g
	}
	e.mu.Unlock()
	g.once.Do(func() { g.err = e.compile(g) })
	return g, g.err
}

// ready compiles the grammar in file, once: a parse's deadline does not
// pay for it (a second or two under the race detector).
func (e *engine) ready(file string) error {
	_, err := e.grammar(file)
	return err
}

// compile compiles g's module and reads its names from a first instance.
func (e *engine) compile(g *grammar) error {
	ctx := context.Background()
	bin, err := modules.ReadFile("wasm/" + g.file)
	if err != nil {
		return fmt.Errorf("read the %s parser: %w", g.file, err)
	}
	if g.compiled, err = e.rt.CompileModule(ctx, bin); err != nil {
		return fmt.Errorf("compile the %s parser: %w", g.file, err)
	}
	in, err := e.instantiate(ctx, g)
	if err != nil {
		return err
	}
	defer in.mod.Close(ctx)
	in.fuel.Set(fuelBase)
	g.names, err = readNames(ctx, in.mod)
	if err != nil {
		return fmt.Errorf("read the %s parser's names: %w", g.file, err)
	}
	return nil
}

// instantiate starts an instance of g: its constructors run once its fuel
// is set (they loop too).
func (e *engine) instantiate(ctx context.Context, g *grammar) (*instance, error) {
	mod, err := e.rt.InstantiateModule(ctx, g.compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return nil, fmt.Errorf("start the %s parser: %w", g.file, err)
	}
	in := &instance{mod: mod, alloc: mod.ExportedFunction("alloc"), release: mod.ExportedFunction("release"), parse: mod.ExportedFunction("parse")}
	in.fuel, _ = mod.ExportedGlobal("fuel").(api.MutableGlobal)
	start := mod.ExportedFunction("_initialize")
	if in.alloc == nil || in.release == nil || in.parse == nil || in.fuel == nil || start == nil || mod.Memory() == nil {
		mod.Close(ctx)
		return nil, fmt.Errorf("start the %s parser: exports missing", g.file)
	}
	in.fuel.Set(fuelBase)
	if _, err := start.Call(ctx); err != nil {
		mod.Close(ctx)
		return nil, fmt.Errorf("start the %s parser: %w", g.file, err)
	}
	return in, nil
}

// readNames reads a grammar's symbol and field names from a fresh
// instance (before it has read anything hostile).
func readNames(ctx context.Context, mod api.Module) (*grammarNames, error) {
	list := func(count, name string, from uint64) ([]string, error) {
		res, err := mod.ExportedFunction(count).Call(ctx)
		if err != nil {
			return nil, err
		}
		n := res[0]
		if n > 1<<16 {
			return nil, fmt.Errorf("%d names", n)
		}
		out := make([]string, n+from)
		for i := from; i < n+from; i++ {
			res, err := mod.ExportedFunction(name).Call(ctx, i)
			if err != nil {
				return nil, err
			}
			out[i] = cString(mod.Memory(), uint32(res[0]))
		}
		return out, nil
	}
	symbols, err := list("symbol_count", "symbol_name", 0)
	if err != nil {
		return nil, err
	}
	fields, err := list("field_count", "field_name", 1) // field ids start at 1
	if err != nil {
		return nil, err
	}
	g := &grammarNames{symbols: symbols, fields: fields, fieldID: map[string]uint16{}}
	for i := len(fields) - 1; i > 0; i-- {
		g.fieldID[fields[i]] = uint16(i)
	}
	return g, nil
}

// cString reads the NUL-terminated string at p, "" for NULL.
func cString(mem api.Memory, p uint32) string {
	if p == 0 {
		return ""
	}
	var b []byte
	for i := uint32(0); i < 256; i++ {
		c, ok := mem.ReadByte(p + i)
		if !ok || c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

var (
	// errParse is a parser that failed on a file: it trapped or gave
	// back no tree.
	errParse = errors.New("the parser failed")
	// errParserMemory is a parser that failed at its memory cap.
	errParserMemory = errors.New("the parser ran out of memory")
	// errParserFuel is a parser stopped by its fuel: a loop that went on
	// past every deadline.
	errParserFuel = errors.New("the parser ran out of fuel")
)

// parse parses src with the grammar in file. Each call has an instance to
// itself: one that failed in any way is closed, never used again; one
// that worked goes back to the pool.
func (e *engine) parse(ctx context.Context, file string, src []byte) (*tree, error) {
	g, err := e.grammar(file)
	if err != nil {
		return nil, err
	}
	in, err := g.take(ctx, e)
	if err != nil {
		return nil, err
	}
	t, err := in.run(ctx, src, g.names, e.fuel(len(src)))
	switch {
	case err != nil:
		in.mod.Close(context.Background())
		if ctx.Err() != nil {
			return nil, fmt.Errorf("parse: %w", ctx.Err())
		}
		if in.fuel.Get() == 0 {
			return nil, fmt.Errorf("%w: %w", errParserFuel, err)
		}
		if mem := in.mod.Memory(); mem != nil && uint64(mem.Size())+wasmPage*16 > uint64(e.memory) {
			return nil, fmt.Errorf("%w (%d MiB): %w", errParserMemory, e.memory>>20, err)
		}
		return nil, err
	case in.mod.Memory().Size() > keepParserMemory:
		in.mod.Close(context.Background())
	default:
		g.put(in)
	}
	return t, nil
}

// take returns an idle instance of g, or a new one.
func (g *grammar) take(ctx context.Context, e *engine) (*instance, error) {
	g.mu.Lock()
	if n := len(g.idle); n > 0 {
		in := g.idle[n-1]
		g.idle = g.idle[:n-1]
		g.mu.Unlock()
		return in, nil
	}
	g.mu.Unlock()
	return e.instantiate(ctx, g)
}

// put pools in, at most one a CPU (Summarize reads files one worker a
// CPU).
func (g *grammar) put(in *instance) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.idle) >= runtime.GOMAXPROCS(0) {
		in.mod.Close(context.Background())
		return
	}
	g.idle = append(g.idle, in)
}

// run writes src into the instance, parses it and decodes the records;
// any failure is an error, the instance to be dropped. Each call into the
// module has fuel for len(src); ctx's end takes the parse's away.
func (in *instance) run(ctx context.Context, src []byte, names *grammarNames, fuel uint64) (t *tree, err error) {
	defer func() {
		// wazero returns traps as errors; a panic here is ours, and
		// still fails this file only.
		if p := recover(); p != nil {
			t, err = nil, fmt.Errorf("%w: %v", errParse, p)
		}
	}()
	mem := in.mod.Memory()
	in.fuel.Set(fuel)
	res, err := in.alloc.Call(ctx, uint64(len(src)))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errParse, err)
	}
	at := uint32(res[0])
	if at == 0 || !mem.Write(at, src) {
		return nil, fmt.Errorf("%w: no memory for the file", errParse)
	}
	in.fuel.Set(fuel)
	res, err = in.parseUntil(ctx, at, uint32(len(src)))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errParse, err)
	}
	if res[0] == 0 {
		return nil, fmt.Errorf("%w: no tree", errParse)
	}
	var head [4]uint32 // struct result: count, recs, nfields, fields
	for i := range head {
		v, ok := mem.ReadUint32Le(uint32(res[0]) + uint32(i)*4)
		if !ok {
			return nil, fmt.Errorf("%w: no result", errBadTree)
		}
		head[i] = v
	}
	count, recs, nfields, fields := head[0], head[1], head[2], head[3]
	if uint64(count)*recordSize > uint64(mem.Size()) || uint64(nfields)*fieldSize > uint64(mem.Size()) {
		return nil, fmt.Errorf("%w: %d records, %d fields", errBadTree, count, nfields)
	}
	buf, ok1 := mem.Read(recs, count*recordSize)
	fbuf, ok2 := mem.Read(fields, nfields*fieldSize)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%w: records out of memory", errBadTree)
	}
	// The buffers are the module's memory: decoded (copied) before it is
	// freed.
	t, err = decodeTree(buf, fbuf, len(src), names)
	if err != nil {
		return nil, err
	}
	in.fuel.Set(fuel)
	for _, p := range []uint32{recs, fields, at} {
		if _, err := in.release.Call(ctx, uint64(p)); err != nil {
			return nil, fmt.Errorf("%w: %w", errParse, err)
		}
	}
	return t, nil
}

// parseUntil calls parse, its fuel taken away when ctx ends: the next
// loop's header traps. The gauge is set from ctx's goroutine while the
// module runs, again each millisecond (the module's own decrement may
// write over one set), never after the call has returned.
func (in *instance) parseUntil(ctx context.Context, at, n uint32) ([]uint64, error) {
	returned, exited := make(chan struct{}), make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(exited)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			in.fuel.Set(0)
			select {
			case <-returned:
				return
			case <-tick.C:
			}
		}
	})
	defer func() {
		close(returned)
		if !stop() {
			<-exited
		}
	}()
	return in.parse.Call(ctx, uint64(at), uint64(n))
}
