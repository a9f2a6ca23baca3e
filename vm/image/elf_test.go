package image

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"testing"
)

// testELF describes a small 64-bit little-endian ELF file for tests: a
// fake vmlinux (a PT_NOTE segment), a fake executable (PT_INTERP or not) or
// a fake kernel module (a .modinfo section).
type testELF struct {
	typ      elf.Type
	machine  elf.Machine
	notes    []byte // content of one PT_NOTE segment; nil for none
	interp   string // content of a PT_INTERP segment; "" for none
	sections []testSection
}

type testSection struct {
	name string
	typ  elf.SectionType
	data []byte
}

// bytes lays the file out as header, program headers, segment and section
// contents, the section name table and the section headers.
func (e testELF) bytes(t testing.TB) []byte {
	t.Helper()
	le := binary.LittleEndian
	type blob struct {
		off  uint64
		data []byte
	}
	var progs []elf.Prog64
	var body bytes.Buffer
	const ehsize, phsize, shsize = 64, 56, 64
	nprog := 0
	if e.notes != nil {
		nprog++
	}
	if e.interp != "" {
		nprog++
	}
	off := uint64(ehsize + nprog*phsize)
	place := func(d []byte) uint64 {
		for (off+uint64(body.Len()))%8 != 0 {
			body.WriteByte(0)
		}
		at := off + uint64(body.Len())
		body.Write(d)
		return at
	}
	if e.interp != "" {
		d := append([]byte(e.interp), 0)
		at := place(d)
		progs = append(progs, elf.Prog64{Type: uint32(elf.PT_INTERP), Flags: uint32(elf.PF_R), Off: at, Filesz: uint64(len(d)), Memsz: uint64(len(d)), Align: 1})
	}
	if e.notes != nil {
		at := place(e.notes)
		progs = append(progs, elf.Prog64{Type: uint32(elf.PT_NOTE), Flags: uint32(elf.PF_R), Off: at, Filesz: uint64(len(e.notes)), Memsz: uint64(len(e.notes)), Align: 4})
	}
	shdrs := []elf.Section64{{}} // the null section
	var shstr bytes.Buffer
	shstr.WriteByte(0)
	for _, s := range e.sections {
		at := place(s.data)
		shdrs = append(shdrs, elf.Section64{Name: uint32(shstr.Len()), Type: uint32(s.typ), Off: at, Size: uint64(len(s.data)), Addralign: 1})
		shstr.WriteString(s.name + "\x00")
	}
	nameOff := uint32(shstr.Len())
	shstr.WriteString(".shstrtab\x00")
	at := place(shstr.Bytes())
	shdrs = append(shdrs, elf.Section64{Name: nameOff, Type: uint32(elf.SHT_STRTAB), Off: at, Size: uint64(shstr.Len()), Addralign: 1})
	shoff := place(nil)

	h := elf.Header64{
		Type: uint16(e.typ), Machine: uint16(e.machine), Version: uint32(elf.EV_CURRENT),
		Phoff: ehsize, Shoff: shoff, Ehsize: ehsize,
		Phentsize: phsize, Phnum: uint16(len(progs)),
		Shentsize: shsize, Shnum: uint16(len(shdrs)), Shstrndx: uint16(len(shdrs) - 1),
	}
	if len(progs) == 0 {
		h.Phoff = 0
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	h.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	h.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	var out bytes.Buffer
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(binary.Write(&out, le, h))
	for _, p := range progs {
		must(binary.Write(&out, le, p))
	}
	out.Write(body.Bytes())
	for _, s := range shdrs {
		must(binary.Write(&out, le, s))
	}
	// Check the result reads back.
	if _, err := elf.NewFile(bytes.NewReader(out.Bytes())); err != nil {
		t.Fatalf("test ELF does not parse: %v", err)
	}
	return out.Bytes()
}

// elfNote encodes one ELF note.
func elfNote(name string, typ uint32, desc []byte) []byte {
	var b bytes.Buffer
	le := binary.LittleEndian
	n := append([]byte(name), 0)
	binary.Write(&b, le, uint32(len(n)))
	binary.Write(&b, le, uint32(len(desc)))
	binary.Write(&b, le, typ)
	b.Write(n)
	b.Write(make([]byte, pad4(len(n))))
	b.Write(desc)
	b.Write(make([]byte, pad4(len(desc))))
	return b.Bytes()
}

// pvhVmlinux is a fake vmlinux with a PVH entry note among other notes.
func pvhVmlinux(t testing.TB) []byte {
	notes := append(elfNote("GNU", 3, []byte("build-id")), elfNote("Xen", xenElfNotePhys32Entry, []byte{0, 0, 0, 1})...)
	return testELF{typ: elf.ET_EXEC, machine: elf.EM_X86_64, notes: notes}.bytes(t)
}

// testModule is a fake kernel module with a .modinfo section.
func testModule(t testing.TB, modinfo ...string) []byte {
	var d []byte
	for _, kv := range modinfo {
		d = append(d, kv...)
		d = append(d, 0)
	}
	return testELF{typ: elf.ET_REL, machine: elf.EM_X86_64, sections: []testSection{
		{name: ".text", typ: elf.SHT_PROGBITS, data: []byte{0xc3}},
		{name: ".modinfo", typ: elf.SHT_PROGBITS, data: d},
	}}.bytes(t)
}

// staticExe is a fake statically linked executable for machine.
func staticExe(t testing.TB, machine elf.Machine) []byte {
	return testELF{typ: elf.ET_EXEC, machine: machine, notes: elfNote("GNU", 3, []byte("static"))}.bytes(t)
}
