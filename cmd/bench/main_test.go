package main

import (
	"io"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-size", "huge"}, `-size "huge": want small or paper`},
		{[]string{"-problems", "pca,tsp"}, `unknown problem "tsp"`},
		{[]string{"-methods", "adam"}, `unknown method "adam"`},
		{[]string{"-time-limit", "-3s"}, "must not be negative"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-nope"}, "flag provided but not defined"},
	} {
		_, err := parse(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parse(%q): error %v, want %q", tc.args, err, tc.want)
		}
	}
	o, err := parse([]string{"-size", "small", "-methods", "rgd"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.methods["rgd"] || o.methods["rsdm-p"] || len(o.problems) != 3 || o.maxIter != 4000 {
		t.Errorf("parsed %+v", o)
	}
}
