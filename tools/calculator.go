package tools

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/file"
)

const calculatorName = "calculator"

// Limits of a calculator expression. Evaluation has no loops, so these
// bound its time and memory too.
const (
	DefaultCalculatorMaxChars = 1000
	DefaultCalculatorMaxNodes = 200
)

type calcArgs struct {
	Expression string `json:"expression"`
}

var calcSchema = newSchema(map[string]property{
	"expression": {
		Type: "string",
		Description: `The expression, e.g. "(17.5 * 3 + 2) / 4", "2^10" or "sqrt(2) * pi". ` +
			"Numbers only: no units, currency signs, variables or text.",
	},
}, "expression")

// calculator evaluates arithmetic with expr, on a whitelisted subset of
// its language: numbers, arithmetic, comparisons and the math functions
// of mathFunctions.
type calculator struct {
	maxChars int
	maxNodes int
	// options are the compile options every expression shares; each
	// compile adds its own syntax checker.
	options []expr.Option
}

func newCalculator(opts Options) tool {
	c := &calculator{maxChars: opts.CalculatorMaxChars, maxNodes: opts.CalculatorMaxNodes}
	c.options = []expr.Option{
		// No env: the only names are the functions and the constants.
		expr.Env(nil),
		expr.DisableAllBuiltins(),
		expr.MaxNodes(uint(c.maxNodes)),
		// All arithmetic runs through mathFunctions, checked at each
		// step; folding constants at compile time would skip the checks.
		expr.Optimize(false),
	}
	c.options = append(c.options, mathOptions()...)
	return tool{
		spec: agentSpec(calculatorName,
			"Evaluates an arithmetic expression and returns the number (true or false for a comparison). "+
				"Use it for any arithmetic beyond the trivial: "+
				"+ - * / % ^, parentheses, comparisons, sqrt, abs, floor, ceil, round, min, max, pow, log, log10, exp, "+
				"sin, cos, tan (radians), and the constants pi and e.",
			calcSchema),
		run: func(_ context.Context, args string) (string, error) {
			var a calcArgs
			if err := calcSchema.decode(args, &a); err != nil {
				return "", err
			}
			return c.eval(a.Expression)
		},
	}
}

// typography maps the signs of typeset arithmetic, which models write
// now and then, to expr's operators, one character for one so positions in
// errors still match what the model wrote.
var typography = strings.NewReplacer("×", "*", "÷", "/", "−", "-")

// eval evaluates one expression; every failure is an error for the model.
func (c *calculator) eval(expression string) (string, error) {
	if n := utf8.RuneCountInString(expression); n > c.maxChars {
		return "", fmt.Errorf("the expression has %d characters, more than the calculator's limit of %d", n, c.maxChars)
	}
	if strings.TrimSpace(expression) == "" {
		return "", errors.New("the expression is empty")
	}
	syntax := &syntaxChecker{}
	program, err := expr.Compile(typography.Replace(expression), append(slices.Clip(c.options), expr.Patch(syntax))...)
	// The checker's reason is the more specific one: expr's own message
	// for a string or a list would talk about types the model never meant.
	if syntax.err != nil {
		return "", syntax.err
	}
	if unknown := syntax.leftover(); unknown != nil {
		return "", unknown
	}
	if err != nil {
		return "", c.exprError(err)
	}
	out, err := expr.Run(program, nil)
	if err != nil {
		return "", c.exprError(err)
	}
	switch v := out.(type) {
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "", errors.New("the result is not a finite number")
		}
		return formatNumber(v), nil
	case bool:
		return strconv.FormatBool(v), nil
	}
	return "", fmt.Errorf("the expression gave %T, not a number", out)
}

// exprError rewrites an error of expr into one line: its message and where
// in the expression it happened, without the multi-line snippet.
func (c *calculator) exprError(err error) error {
	var fe *file.Error
	if !errors.As(err, &fe) {
		return err
	}
	// expr's messages name Go types; the model thinks in numbers.
	msg := strings.TrimSpace(strings.ReplaceAll(fe.Message, "float64", "number"))
	switch {
	case strings.Contains(msg, "maximum allowed nodes"):
		return fmt.Errorf("the expression is too complex: more than %d numbers, operators and calls", c.maxNodes)
	case strings.HasPrefix(msg, "invalid integer literal") && strings.Contains(msg, "out of range"):
		msg = fmt.Sprintf("a whole number above %d: write it with an exponent, such as 1.5e19", math.MaxInt64)
	case strings.HasPrefix(msg, "invalid float literal") && strings.Contains(msg, "out of range"):
		msg = "a number too large for the calculator (the largest is about 1.8e308)"
	}
	if fe.Snippet == "" {
		return errors.New(msg)
	}
	return fmt.Errorf("%s (at character %d)", msg, fe.From+1)
}

// formatNumber writes v plainly: whole numbers that a float64 holds exactly
// without a fraction, others with up to 12 significant digits, which hides
// binary rounding such as 0.1+0.2 = 0.30000000000000004.
func formatNumber(v float64) string {
	const exactInts = 1 << 53
	if v == 0 {
		return "0" // also -0
	}
	if v == math.Trunc(v) && math.Abs(v) <= exactInts {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 12, 64)
}
