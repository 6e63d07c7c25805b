package compose

import (
	"errors"
	"maps"
	"testing"
)

func TestParseDotenv(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want map[string]string
		line int // of the error, 0 for none
	}{
		{name: "plain", in: "A=1\nB=two words\n", want: map[string]string{"A": "1", "B": "two words"}},
		{name: "comments and blanks", in: "\xef\xbb\xbf# c\n\n  A=1 # trailing\n#B=2\n", want: map[string]string{"A": "1"}},
		{name: "export", in: "export A=1\n", want: map[string]string{"A": "1"}},
		{name: "single quotes literal", in: `A='x # $Y \n'`, want: map[string]string{"A": `x # $Y \n`}},
		{name: "double quotes escapes", in: `A="a\"b\\c\nd"`, want: map[string]string{"A": "a\"b\\c\nd"}},
		{name: "hash inside a word", in: "A=x#y\n", want: map[string]string{"A": "x#y"}},
		{name: "empty", in: "A=\nB=''\n", want: map[string]string{"A": "", "B": ""}},
		{name: "bare name reuses an earlier value", in: "A=1\nA\nB\n", want: map[string]string{"A": "1"}},
		{name: "no expansion", in: "A=1\nB=${A}\n", want: map[string]string{"A": "1", "B": "${A}"}},
		{name: "later wins", in: "A=1\nA=2\n", want: map[string]string{"A": "2"}},
		{name: "space in name", in: "A=1\nB C=2\n", line: 2},
		{name: "no name", in: "=1\n", line: 1},
		{name: "unterminated quote", in: "A=1\nB=\"x\n", line: 2},
		{name: "text after quote", in: "A='x' y\n", line: 1},
		{name: "invalid utf8", in: "A=\xff\n", line: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := map[string]string{}
			err := parseDotenv([]byte(c.in), got)
			if c.line != 0 {
				var le *lineError
				if !errors.As(err, &le) || le.line != c.line {
					t.Fatalf("error %v, want one on line %d", err, c.line)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}
