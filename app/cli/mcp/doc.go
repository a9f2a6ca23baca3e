// Package mcp holds the tests of airlock mcp, the MCP server for agents
// on the host: the SDK's own client drives the real command over stdio
// (the test binary acting as airlock, clitest.Main) through a sandbox's
// whole outward flow on a real VM, and the attacks on it. They are apart
// from app/cli's other VM tests so that go test runs them side by side.
//
// It has no code but tests, and must not import app/gui or fyne (like
// app/cli).
package mcp
