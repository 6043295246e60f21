// Package scriptcheck holds the tests of the Makefile's targets and of the
// scripts under scripts/ that no Go package owns: each runs a target or a
// script in a temporary folder that holds a user's files where it writes,
// and checks that the files stay as they were and that the target or the
// script still does its work. It has no code of its own.
package scriptcheck
