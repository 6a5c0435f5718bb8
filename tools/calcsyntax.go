package tools

import (
	"fmt"
	"strings"

	"github.com/expr-lang/expr/ast"
)

// syntaxChecker lets through the part of expr's language a calculator
// needs and refuses the rest, and rewrites what it lets through for
// mathFunctions. Turning off expr's builtins is not enough on its own:
// strings, lists, maps, ranges, map/filter and variables still parse.
//
// It runs as an expr patch, after parsing and before type checking, and
// sees each node after its children.
type syntaxChecker struct {
	// err is the reason of the last node refused: the outermost, since
	// children come first, so a.b is refused as a field access rather
	// than as the text "b" expr makes of its name.
	err error
	// names are identifiers seen and not yet claimed as a callee by their
	// CallNode: left over, they are names with no value.
	names map[ast.Node]string
}

// allowedBinary are the binary operators of arithmetic, comparison and
// logic; the arithmetic ones become calls of operatorFunctions.
var allowedBinary = map[string]bool{
	"+": true, "-": true, "*": true, "/": true, "%": true, "^": true, "**": true,
	"==": true, "!=": true, "<": true, ">": true, "<=": true, ">=": true,
	"and": true, "or": true, "&&": true, "||": true,
}

func (c *syntaxChecker) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.IntegerNode:
		// One number type: no integer overflow, and one signature per
		// function.
		c.patch(node, &ast.FloatNode{Value: float64(n.Value)})
	case *ast.FloatNode, *ast.BoolNode, *ast.ConditionalNode:
	case *ast.IdentifierNode:
		if v, ok := constants[n.Value]; ok {
			c.patch(node, &ast.FloatNode{Value: v})
			return
		}
		if c.names == nil {
			c.names = map[ast.Node]string{}
		}
		c.names[n] = n.Value
	case *ast.UnaryNode:
		switch n.Operator {
		case "-", "+", "!", "not":
		default:
			c.fail(n, fmt.Sprintf("the operator %q is not supported", n.Operator))
		}
	case *ast.BinaryNode:
		if !allowedBinary[n.Operator] {
			c.fail(n, fmt.Sprintf("the operator %q is not supported", n.Operator))
		}
	case *ast.CallNode:
		c.call(node, n)
	case *ast.StringNode, *ast.BytesNode:
		c.fail(n, "text is not supported: the calculator works with numbers only")
	case *ast.ArrayNode, *ast.MapNode, *ast.PairNode, *ast.MemberNode, *ast.ChainNode, *ast.SliceNode:
		c.fail(n, "lists, maps and fields are not supported: the calculator works with numbers only")
	case *ast.VariableDeclaratorNode, *ast.SequenceNode:
		c.fail(n, "variables and several expressions are not supported: write one expression")
	case *ast.NilNode:
		c.fail(n, "nil is not supported: the calculator works with numbers only")
	default:
		// Builtins, predicates (map, filter, …) and whatever a later expr
		// adds.
		c.fail(n, "this is not supported: use numbers, + - * / % ^, comparisons and "+strings.Join(callableNames(), ", "))
	}
}

// call lets through calls of mathFunctions; a constant written as a call,
// pi(), becomes the constant.
func (c *syntaxChecker) call(node *ast.Node, n *ast.CallNode) {
	switch callee := n.Callee.(type) {
	case *ast.IdentifierNode:
		delete(c.names, callee)
		if !callable(callee.Value) {
			c.fail(n, fmt.Sprintf("unknown function %q (the functions are %s; the constants pi and e)",
				clip(callee.Value), strings.Join(callableNames(), ", ")))
		}
	case *ast.FloatNode: // a constant, rewritten above
		if len(n.Arguments) > 0 {
			c.fail(n, "pi and e are constants: they take no arguments")
			return
		}
		c.patch(node, callee)
	default:
		c.fail(n, "only the calculator's functions can be called")
	}
}

// leftover reports a name that is not a constant and was not called.
func (c *syntaxChecker) leftover() error {
	var first ast.Node
	for n := range c.names {
		if first == nil || n.Location().From < first.Location().From {
			first = n
		}
	}
	if first == nil {
		return nil
	}
	name := c.names[first]
	if callable(name) {
		return fmt.Errorf("%s is a function: call it with parentheses, such as %s(2) (at character %d)", name, name, first.Location().From+1)
	}
	return fmt.Errorf("unknown name %q: the calculator has no variables, only the constants pi and e (at character %d)",
		clip(name), first.Location().From+1)
}

func (c *syntaxChecker) patch(node *ast.Node, with ast.Node) {
	with.SetLocation((*node).Location())
	ast.Patch(node, with)
}

func (c *syntaxChecker) fail(n ast.Node, reason string) {
	c.err = fmt.Errorf("%s (at character %d)", reason, n.Location().From+1)
}
