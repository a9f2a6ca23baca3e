// Package layout holds no code: its tests enforce the architecture of the
// repository as docs/architecture.md describes it. The table under
// "## Packages" there has one row per package, and each row's "must not
// import" cell is a rule the tests read and check, for linux and darwin,
// with the rules DESIGN.md states for the whole tree on top (globals in
// rules_test.go: nothing outside app imports app; only app/gui/... and main
// import fyne; only vm/vz imports vz; guest never imports vm, fyne or vz;
// the guest agent never links testing; review and sync know nothing of vm,
// guest or fyne; nothing depends on testkit/..., app/cli/clitest or this
// package, but test harness itself (testkit, app/cli/clitest); internal/...
// imports nothing of the module outside internal).
// Every package carries a package comment that says what it must not
// import, and no function outside tests is over 120 lines save those
// funclen_test.go allows, each at its length today, and a run is decided
// once, in app/plan (contract_test.go).
//
// It must not import anything outside the standard library, and nothing
// may import it.
package layout
