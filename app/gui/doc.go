// Package gui is Airlock's desktop app, built with fyne: the main window
// (the sandboxes, drop a folder to start a run), the run dialog, the run
// view (the agent's terminal, live) and the review window (files and hunks
// to approve or reject, the agent's rationale, apply and undo).
//
// It is a client of the app's services, never a second implementation:
// each window talks to the small interface of what it calls
// (MainService, ReviewService and its panes' parts, CompareService,
// ConflictService), all of which StoreService implements over
// app/sandbox and app/plan. Windows are built by functions that tests call with fyne's
// test app; the real app (fyne's GL driver) is opened only by
// app/gui/desktop. Goroutines touch widgets only through fyne.Do.
//
// Only this package and its subpackages import fyne. It must not import
// app/cli (main hands the desktop app to the CLI) or a hypervisor package
// (vm/qemu, vm/vz, vz): machines are booted through the planner
// StoreService is given.
package gui
