package gorgoniaop

import (
	"fmt"
	"strings"

	G "gorgonia.org/gorgonia"
)

// UnaryFunc is a function of one argument that Gorgonia applies
// elementwise (an elemUnaryOp), by the name the op prints: the key of the
// compiler's and the exporter's tables of unary functions.
type UnaryFunc string

// Gorgonia's unary functions that the compiler or the exporter knows.
const (
	Abs      UnaryFunc = "abs"
	Sign     UnaryFunc = "sign"
	Ceil     UnaryFunc = "ceil"
	Floor    UnaryFunc = "floor"
	Sin      UnaryFunc = "sin"
	Cos      UnaryFunc = "cos"
	Exp      UnaryFunc = "exp"
	Ln       UnaryFunc = "ln"
	Log2     UnaryFunc = "log2"
	Neg      UnaryFunc = "neg"
	Square   UnaryFunc = "square"
	Sqrt     UnaryFunc = "sqrt"
	Inv      UnaryFunc = "inv"
	InvSqrt  UnaryFunc = "invSqrt"
	Cube     UnaryFunc = "cube"
	Tanh     UnaryFunc = "tanh"
	Sigmoid  UnaryFunc = "sigmoid"
	Log1p    UnaryFunc = "log1p"
	Expm1    UnaryFunc = "expm1"
	Softplus UnaryFunc = "softplus"
)

// UnaryOf returns the function of an elemUnaryOp.
func UnaryOf(op G.Op) UnaryFunc { return UnaryFunc(fmt.Sprint(op)) }

// BinaryFunc is an elementwise function of two arguments of Gorgonia (an
// elemBinOp), by the symbol the op prints: the key of the compiler's and
// the exporter's tables of binary functions.
type BinaryFunc string

// Gorgonia's binary functions that the compiler or the exporter knows.
const (
	Add BinaryFunc = "+"
	Sub BinaryFunc = "-"
	Mul BinaryFunc = "⊙" // elementwise (HadamardProd)
	Div BinaryFunc = "÷" // elementwise (HadamardDiv)
	Pow BinaryFunc = "^"
	Lt  BinaryFunc = "<"
	Gt  BinaryFunc = ">"
	Lte BinaryFunc = "<="
	Gte BinaryFunc = ">="
	Eq  BinaryFunc = "=="
	Ne  BinaryFunc = "!="
)

// BinaryOf returns the function of an elemBinOp: its printed symbol,
// without the types that follow it.
func BinaryOf(op G.Op) BinaryFunc {
	sym, _, _ := strings.Cut(fmt.Sprint(op), " ")
	return BinaryFunc(sym)
}
