package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	exprbuiltin "github.com/expr-lang/expr/builtin"

	"koe/agent"
)

// calc runs the calculator through a Box, the way the loop does.
func calc(t *testing.T, b *Box, expression string) (string, error) {
	t.Helper()
	args, err := json.Marshal(map[string]string{"expression": expression})
	if err != nil {
		t.Fatal(err)
	}
	return b.Call(context.Background(), agent.ToolCall{ID: "c1", Name: "calculator", Arguments: string(args)})
}

func TestCalculator(t *testing.T) {
	b := newBox(t, []string{"calculator"}, Options{})
	tests := []struct{ expr, want string }{
		{"1+2", "3"},
		{"6 * 7", "42"},
		{"(17.5 * 3 + 2) / 4", "13.625"},
		{"1/3", "0.333333333333"},
		{"2/3", "0.666666666667"},
		{"10/4", "2.5"},
		{"0.1 + 0.2", "0.3"},
		{"7 % 3", "1"},
		{"-7 % 3", "-1"},
		{"7.5 % 2", "1.5"},
		{"2^10", "1024"},
		{"2**10", "1024"},
		{"2^3^2", "512"}, // right-associative
		{"-2^2", "-4"},   // the power binds first
		{"(-2)^2", "4"},
		{"2^-1", "0.5"},
		{"2^0.5", "1.41421356237"},
		{"(-8)^3", "-512"},
		{"2^53", "9007199254740992"},
		{"2^53 + 1", "9007199254740992"}, // float64 cannot hold 2^53+1
		{"2^64", "1.84467440737e+19"},
		{"9223372036854775807 + 1", "9.22337203685e+18"}, // no integer wrap-around
		{"99999999999 * 99999999999", "9.9999999998e+21"},
		{"1e-20", "1e-20"},
		{"1.5e3", "1500"},
		{"0x10 + 1_000", "1016"},
		{"-0", "0"},
		{"0 * -1", "0"},
		{"+5", "5"},
		{"1 +\n 2", "3"},
		{"((((((((((1))))))))))", "1"},
		{"3 × 4 ÷ 2 − 1", "5"},
		{"sqrt(16)", "4"},
		{"sqrt(2) * pi", "4.44288293816"},
		{"pi", "3.14159265359"},
		{"π", "3.14159265359"},
		{"pi()", "3.14159265359"},
		{"e", "2.71828182846"},
		{"e()", "2.71828182846"},
		{"abs(-3.5)", "3.5"},
		{"floor(-2.5)", "-3"},
		{"ceil(2.1)", "3"},
		{"round(2.5)", "3"},
		{"round(-2.5)", "-3"},
		{"round(2.345, 2)", "2.35"},
		{"round(1234.5, -2)", "1200"},
		{"round(1e300, 15)", "1e+300"},
		{"min(3, 1, 2)", "1"},
		{"max(3, 1, 2)", "3"},
		{"max(4)", "4"},
		{"pow(2, 8)", "256"},
		{"log(e)", "1"},
		{"log(8, 2)", "3"},
		{"log10(1000)", "3"},
		{"exp(0)", "1"},
		{"sin(pi/2)", "1"},
		{"cos(0)", "1"},
		{"tan(0)", "0"},
		{"2 | sqrt()", "1.41421356237"}, // expr's pipe is a call
		{"2 > 1", "true"},
		{"2 <= 1", "false"},
		{"1 + 1 == 2", "true"},
		{"1 != 1 or 2 > 1", "true"},
		{"not (1 < 2)", "false"},
		{"3 > 2 ? 10 : 20", "10"},
		{"if 1 > 2 { 1 } else { 2 }", "2"},
	}
	for _, tt := range tests {
		got, err := calc(t, b, tt.expr)
		if err != nil || got != tt.want {
			t.Errorf("%q = %q, %v; want %q", tt.expr, got, err, tt.want)
		}
	}
}

func TestCalculatorErrors(t *testing.T) {
	b := newBox(t, []string{"calculator"}, Options{})
	tests := []struct{ expr, want string }{
		{"", "the expression is empty"},
		{"   ", "the expression is empty"},
		{"1/0", "division by zero (at character 2)"},
		{"1/(2-2)", "division by zero"},
		{"5 % 0", "division by zero (in %)"},
		{"0^-1", "division by zero (0 ^ a negative power)"},
		{"pow(0, -2)", "division by zero (0 pow a negative power)"},
		{"10^400", "the result of ^ is too large (at character 3)"},
		{"1/(10^400)", "the result of ^ is too large"}, // an overflow does not vanish into 0
		{"1e308 * 10", "the result of * is too large"},
		{"1e308 + 1e308", "the result of + is too large"},
		{"-1e308 - 1e308", "the result of - is too large"},
		{"exp(1000)", "the result of exp is too large"},
		{"(-8)^(1/3)", "a negative number to a fractional power (-8 ^ 0.333333333333) is not a real number"},
		{"sqrt(-1)", "sqrt of a negative number (-1)"},
		{"log(0)", "log of 0: only positive numbers have a logarithm"},
		{"log(-1)", "log of -1"},
		{"log(8, 1)", "log base 1: the base must be positive and not 1"},
		{"log(8, -2)", "log base -2"},
		{"log10(0)", "log10 of 0"},
		{"round(1.5, 0.5)", "round's digits must be a whole number from -15 to 15, not 0.5"},
		{"round(1.5, 16)", "round's digits must be a whole number from -15 to 15, not 16"},
		{"12345678901234567890", "a whole number above 9223372036854775807: write it with an exponent"},
		{"1e400", "a number too large for the calculator"},
		// Syntax.
		{"(1", "unexpected token EOF (at character 2)"},
		{"1 +", "unexpected token EOF"},
		{"2 3", "unexpected token Number"},
		{"1 ++ 2 )", "unexpected token"},
		{"#", "unexpected token"},
		{"２＋３", "unrecognized character"},
		{"5 apples + 3", "unexpected token Identifier"},
		// What the calculator does not do.
		{"x + 1", `unknown name "x": the calculator has no variables, only the constants pi and e (at character 1)`},
		{"$env", `unknown name "$env"`},
		{"sqrt", "sqrt is a function: call it with parentheses, such as sqrt(2)"},
		{"foo(1)", `unknown function "foo" (the functions are sqrt, abs, floor, ceil, round, min, max, pow, log, log10, exp, sin, cos, tan; the constants pi and e)`},
		{"_add(1, 2)", `unknown function "_add"`},
		{"pi(2)", "pi and e are constants: they take no arguments"},
		{"sqrt(1, 2)", "too many arguments to call sqrt"},
		{"max()", "not enough arguments to call max"},
		{"round(1, 2, 3)", "round"},
		{"sqrt(true)", "cannot use bool as argument (type number) to call sqrt (at character 6)"},
		{"true + 1", "invalid operation: + (mismatched types bool and number)"},
		{"1 == true", "mismatched types number and bool"},
		{"1 ? 2 : 3", "non-bool expression (type number) used as condition"},
		{"1 and 2", "invalid operation"},
		{"'a' + 'b'", "text is not supported: the calculator works with numbers only"},
		{`"5" * 2`, "text is not supported"},
		{"[1, 2][0]", "lists, maps and fields are not supported"},
		{"{a: 1}.a", "lists, maps and fields are not supported"},
		{"a.b", "lists, maps and fields are not supported"},
		{"$env.PATH", "lists, maps and fields are not supported"},
		{"1..3", `the operator ".." is not supported`},
		{"1 in [1]", `the operator "in" is not supported`},
		{"1 ?? 2", `the operator "??" is not supported`},
		{`"a" matches "b"`, `the operator "matches" is not supported`},
		{"let x = 2; x * 3", "variables and several expressions are not supported"},
		{"1; 2", "variables and several expressions are not supported"},
		{"nil", "nil is not supported"},
		{"map([1, 2], # * 2)", "this is not supported"},
		{"now()", `unknown function "now"`},
	}
	for _, tt := range tests {
		got, err := calc(t, b, tt.expr)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q = %q, %v; want an error containing %q", tt.expr, got, err, tt.want)
			continue
		}
		if got != "" {
			t.Errorf("%q: result %q with error %v", tt.expr, got, err)
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || len(msg) > maxErrorChars {
			t.Errorf("%q: error is not one short line: %q", tt.expr, msg)
		}
	}
}

// Turning off expr's builtins is one guard, the syntax checker another:
// no builtin is reachable, whatever its arguments.
func TestCalculatorReachesNoExprBuiltin(t *testing.T) {
	b := newBox(t, []string{"calculator"}, Options{})
	if len(exprbuiltin.Builtins) < 30 {
		t.Fatalf("expr lists only %d builtins", len(exprbuiltin.Builtins))
	}
	for _, f := range exprbuiltin.Builtins {
		if callable(f.Name) { // a name the calculator defines itself
			continue
		}
		for _, args := range []string{"()", "(1)", "(1, 2)", `("a")`, "([1, 2], # > 1)"} {
			got, err := calc(t, b, f.Name+args)
			if err == nil {
				t.Errorf("%s%s = %q, want an error", f.Name, args, got)
			}
		}
	}
}

func TestCalculatorArguments(t *testing.T) {
	b := newBox(t, []string{"calculator"}, Options{})
	tests := []struct{ args, want string }{
		{``, `missing required argument "expression" (expected "expression": string)`},
		{`{}`, `missing required argument "expression"`},
		{`{"expression": null}`, `missing required argument "expression"`},
		{`{"expression": 42}`, `argument "expression" must be a string, not a number`},
		{`{"expression": ["1+1"]}`, `argument "expression" must be a string, not an array`},
		{`{"expression": "1+1", "precision": 3}`, `unknown argument "precision" (expected "expression": string)`},
		{`{"expr": "1+1"}`, `unknown argument "expr"`},
		{`"1+1"`, "the arguments must be a JSON object, not a string"},
		{`1+1`, "the arguments are not valid JSON"},
	}
	for _, tt := range tests {
		_, err := b.Call(context.Background(), agent.ToolCall{Name: "calculator", Arguments: tt.args})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error containing %q", tt.args, err, tt.want)
		}
	}
}

func TestCalculatorLimits(t *testing.T) {
	b := newBox(t, []string{"calculator"}, Options{})
	// 1000 characters pass, 1001 do not.
	atLimit := "1" + strings.Repeat(" ", 998) + "1"
	if got, err := calc(t, b, atLimit); err == nil || strings.Contains(err.Error(), "characters") {
		// "1 … 1" is a syntax error, not a length error.
		t.Errorf("1000 characters: %q, %v", got, err)
	}
	long := "1" + strings.Repeat(" ", 999) + "1"
	_, err := calc(t, b, long)
	if err == nil || err.Error() != "the expression has 1001 characters, more than the calculator's limit of 1000" {
		t.Errorf("1001 characters: %v", err)
	}
	// Characters, not bytes.
	if _, err := calc(t, b, "π"+strings.Repeat(" ", 998)); err != nil {
		t.Errorf("999 characters in 1000+ bytes: %v", err)
	}

	// 100 ones and 99 pluses are 199 nodes; one term more is 201.
	sum := func(n int) string { return strings.TrimSuffix(strings.Repeat("1+", n), "+") }
	if got, err := calc(t, b, sum(100)); err != nil || got != "100" {
		t.Errorf("199 nodes: %q, %v", got, err)
	}
	_, err = calc(t, b, sum(101))
	if err == nil || err.Error() != "the expression is too complex: more than 200 numbers, operators and calls" {
		t.Errorf("201 nodes: %v", err)
	}
	nested := func(n int) string { return strings.Repeat("-(", n) + "1" + strings.Repeat(")", n) }
	if got, err := calc(t, b, nested(199)); err != nil || got != "-1" {
		t.Errorf("200 nested nodes: %q, %v", got, err)
	}
	if _, err := calc(t, b, nested(200)); err == nil || !strings.Contains(err.Error(), "too complex") {
		t.Errorf("201 nested nodes: %v", err)
	}

	small := newBox(t, []string{"calculator"}, Options{CalculatorMaxChars: 10, CalculatorMaxNodes: 5})
	if _, err := calc(t, small, "1+2+3+4+5+6"); err == nil || !strings.Contains(err.Error(), "limit of 10") {
		t.Errorf("CalculatorMaxChars 10: %v", err)
	}
	if _, err := calc(t, small, "1+2+3+4"); err == nil || !strings.Contains(err.Error(), "more than 5 numbers") {
		t.Errorf("CalculatorMaxNodes 5: %v", err)
	}
	if got, err := calc(t, small, "1+2+3"); err != nil || got != "6" {
		t.Errorf("within small limits: %q, %v", got, err)
	}
}

func TestFormatNumber(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{42, "42"},
		{-42, "-42"},
		{1e15, "1000000000000000"},
		{1 << 53, "9007199254740992"},
		{1<<53 + 2, "9.00719925474e+15"},
		{1.0 / 3, "0.333333333333"},
		{-2.5, "-2.5"},
		{0.1 + 0.2, "0.3"},
		{123456.789, "123456.789"},
		{1e-7, "1e-07"},
		{1.5e300, "1.5e+300"},
	}
	for _, tt := range tests {
		if got := formatNumber(tt.v); got != tt.want {
			t.Errorf("formatNumber(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

// The operators and functions agree with Go's math on ordinary values.
func TestCalculatorMatchesMath(t *testing.T) {
	b := newBox(t, []string{"calculator"}, Options{})
	for _, x := range []float64{0.5, 1, 2.25, 7, 123.456} {
		for expression, want := range map[string]float64{
			"sqrt(%v)":     math.Sqrt(x),
			"log(%v)":      math.Log(x),
			"exp(%v)":      math.Exp(x),
			"sin(%v)":      math.Sin(x),
			"%v ^ 1.5":     math.Pow(x, 1.5),
			"%v / 7":       x / 7,
			"%v * %[1]v":   x * x,
			"%v %% 0.3":    math.Mod(x, 0.3),
			"-%v - 3.25":   -x - 3.25,
			"max(%v, 2.5)": math.Max(x, 2.5),
		} {
			e := fmt.Sprintf(expression, x)
			got, err := calc(t, b, e)
			if err != nil || got != formatNumber(want) {
				t.Errorf("%s = %q, %v; want %s", e, got, err, formatNumber(want))
			}
		}
	}
}

// BenchmarkCalculator is the cost of one call as the loop makes it:
// decoding, compiling (expr has no cache here) and running.
func BenchmarkCalculator(b *testing.B) {
	box, err := New([]string{"calculator"}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	call := agent.ToolCall{Name: "calculator", Arguments: `{"expression":"(17.5 * 3 + 2) / 4 + sqrt(2) * pi"}`}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := box.Call(context.Background(), call); err != nil {
			b.Fatal(err)
		}
	}
}
