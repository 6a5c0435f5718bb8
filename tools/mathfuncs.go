package tools

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/expr-lang/expr"
)

// mathFunction is a function of the calculator, called by name in an
// expression or standing for an arithmetic operator.
type mathFunction struct {
	name string
	// shown names it in errors when name is not what the model wrote (an
	// operator).
	shown string
	// arities lists the argument counts it takes; variadic takes one or
	// more.
	arities  []int
	variadic bool
	fn       func(args []float64) (float64, error)
}

// Names of the functions that stand for the arithmetic operators. They
// cannot be called by name: the syntax checker only lets mathFunctions
// through.
var operatorFunctions = []struct{ op, name string }{
	{"+", "_add"}, {"-", "_sub"}, {"*", "_mul"}, {"/", "_div"}, {"%", "_mod"}, {"^", "_pow"}, {"**", "_pow"},
}

// mathFunctions are the functions an expression may call.
var mathFunctions = []mathFunction{
	{name: "sqrt", arities: []int{1}, fn: func(a []float64) (float64, error) {
		if a[0] < 0 {
			return 0, fmt.Errorf("sqrt of a negative number (%s)", formatNumber(a[0]))
		}
		return math.Sqrt(a[0]), nil
	}},
	{name: "abs", arities: []int{1}, fn: unary(math.Abs)},
	{name: "floor", arities: []int{1}, fn: unary(math.Floor)},
	{name: "ceil", arities: []int{1}, fn: unary(math.Ceil)},
	{name: "round", arities: []int{1, 2}, fn: round},
	{name: "min", variadic: true, fn: func(a []float64) (float64, error) { return slices.Min(a), nil }},
	{name: "max", variadic: true, fn: func(a []float64) (float64, error) { return slices.Max(a), nil }},
	{name: "pow", arities: []int{2}, fn: func(a []float64) (float64, error) { return power("pow", a[0], a[1]) }},
	{name: "log", arities: []int{1, 2}, fn: logarithm},
	{name: "log10", arities: []int{1}, fn: func(a []float64) (float64, error) {
		if a[0] <= 0 {
			return 0, fmt.Errorf("log10 of %s: only positive numbers have a logarithm", formatNumber(a[0]))
		}
		return math.Log10(a[0]), nil
	}},
	{name: "exp", arities: []int{1}, fn: unary(math.Exp)},
	{name: "sin", arities: []int{1}, fn: unary(math.Sin)},
	{name: "cos", arities: []int{1}, fn: unary(math.Cos)},
	{name: "tan", arities: []int{1}, fn: unary(math.Tan)},

	{name: "_add", shown: "+", arities: []int{2}, fn: func(a []float64) (float64, error) { return a[0] + a[1], nil }},
	{name: "_sub", shown: "-", arities: []int{2}, fn: func(a []float64) (float64, error) { return a[0] - a[1], nil }},
	{name: "_mul", shown: "*", arities: []int{2}, fn: func(a []float64) (float64, error) { return a[0] * a[1], nil }},
	{name: "_div", shown: "/", arities: []int{2}, fn: func(a []float64) (float64, error) {
		if a[1] == 0 {
			return 0, errors.New("division by zero")
		}
		return a[0] / a[1], nil
	}},
	{name: "_mod", shown: "%", arities: []int{2}, fn: func(a []float64) (float64, error) {
		if a[1] == 0 {
			return 0, errors.New("division by zero (in %)")
		}
		return math.Mod(a[0], a[1]), nil
	}},
	{name: "_pow", shown: "^", arities: []int{2}, fn: func(a []float64) (float64, error) { return power("^", a[0], a[1]) }},
}

// constants stand for themselves, written with or without parentheses.
var constants = map[string]float64{"pi": math.Pi, "π": math.Pi, "e": math.E}

// callable reports whether an expression may call name.
func callable(name string) bool {
	return !isOperatorFunction(name) && slices.ContainsFunc(mathFunctions, func(f mathFunction) bool { return f.name == name })
}

func isOperatorFunction(name string) bool {
	return slices.ContainsFunc(operatorFunctions, func(o struct{ op, name string }) bool { return o.name == name })
}

// callableNames lists the functions an expression may call, for errors.
func callableNames() []string {
	var names []string
	for _, f := range mathFunctions {
		if callable(f.name) {
			names = append(names, f.name)
		}
	}
	return names
}

// mathOptions registers mathFunctions and the operators with expr. Every
// value in an expression is a float64 (the syntax checker turns integer
// literals into floats), so one signature per arity is enough; expr's
// checker then refuses wrong argument counts and types with its own
// message.
func mathOptions() []expr.Option {
	var opts []expr.Option
	for _, f := range mathFunctions {
		var types []any
		for _, n := range f.arities {
			types = append(types, signature(n))
		}
		if f.variadic {
			types = append(types, new(func(float64, ...float64) float64))
		}
		opts = append(opts, expr.Function(f.name, f.call, types...))
	}
	for _, o := range operatorFunctions {
		opts = append(opts, expr.Operator(o.op, o.name))
	}
	return opts
}

// signature is a func type of n float64 arguments, for expr's checker.
func signature(n int) any {
	switch n {
	case 1:
		return new(func(float64) float64)
	case 2:
		return new(func(float64, float64) float64)
	}
	panic(fmt.Sprintf("tools: no signature for %d arguments", n))
}

// call adapts f to expr's calling convention. expr's checker has matched
// the arguments to a signature already; they are checked again here so a
// change in expr fails as an error, not a panic.
func (f mathFunction) call(params ...any) (any, error) {
	shown := f.name
	if f.shown != "" {
		shown = f.shown
	}
	if !f.variadic && !slices.Contains(f.arities, len(params)) || f.variadic && len(params) == 0 {
		return nil, fmt.Errorf("%s got %d arguments", shown, len(params))
	}
	args := make([]float64, len(params))
	for i, p := range params {
		v, ok := p.(float64)
		if !ok {
			return nil, fmt.Errorf("%s takes numbers, not %T", shown, p)
		}
		args[i] = v
	}
	v, err := f.fn(args)
	if err != nil {
		return nil, err
	}
	return finite(shown, v)
}

func unary(fn func(float64) float64) func([]float64) (float64, error) {
	return func(a []float64) (float64, error) { return fn(a[0]), nil }
}

// finite turns an infinite or undefined step into an error, so that an
// overflow cannot vanish into a later step (1/(10^400) would be 0). call
// checks every function's and operator's result with it.
func finite(op string, v float64) (float64, error) {
	switch {
	case math.IsInf(v, 0):
		return 0, fmt.Errorf("the result of %s is too large", op)
	case math.IsNaN(v):
		return 0, fmt.Errorf("the result of %s is undefined", op)
	}
	return v, nil
}

func power(op string, x, y float64) (float64, error) {
	if x == 0 && y < 0 {
		return 0, fmt.Errorf("division by zero (0 %s a negative power)", op)
	}
	if x < 0 && y != math.Trunc(y) {
		return 0, fmt.Errorf("a negative number to a fractional power (%s %s %s) is not a real number", formatNumber(x), op, formatNumber(y))
	}
	return math.Pow(x, y), nil
}

func logarithm(a []float64) (float64, error) {
	if a[0] <= 0 {
		return 0, fmt.Errorf("log of %s: only positive numbers have a logarithm", formatNumber(a[0]))
	}
	if len(a) == 1 {
		return math.Log(a[0]), nil
	}
	base := a[1]
	if base <= 0 || base == 1 {
		return 0, fmt.Errorf("log base %s: the base must be positive and not 1", formatNumber(base))
	}
	return math.Log(a[0]) / math.Log(base), nil
}

// maxRoundDigits is as many decimals as a float64 holds.
const maxRoundDigits = 15

// round rounds half away from zero, to whole numbers or to a number of
// decimals (negative: tens, hundreds, …).
func round(a []float64) (float64, error) {
	x := a[0]
	if len(a) == 1 {
		return math.Round(x), nil
	}
	d := a[1]
	if d != math.Trunc(d) || math.Abs(d) > maxRoundDigits {
		return 0, fmt.Errorf("round's digits must be a whole number from -%d to %d, not %s", maxRoundDigits, maxRoundDigits, formatNumber(d))
	}
	if d < 0 {
		p := math.Pow(10, -d)
		return math.Round(x/p) * p, nil
	}
	p := math.Pow(10, d)
	if math.IsInf(x*p, 0) {
		return x, nil // too large to have decimals
	}
	return math.Round(x*p) / p, nil
}
