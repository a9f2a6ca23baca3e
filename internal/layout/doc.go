// Package layout holds no code: its tests enforce the architecture of the
// repository as docs/architecture.md describes it. Every package carries a
// package comment, and the import rules hold (nothing imports app; guest
// never reaches vm, fyne or vz; review and sync know nothing of VMs, guests
// or the GUI; only the GUI imports fyne; only vm/vz imports vz; packaging
// stays out of the program: no app, guest, sync, review, fyne or vz).
//
// It must not be imported by anything.
package layout
