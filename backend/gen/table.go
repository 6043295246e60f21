package main

// ops are backend.UnaryOp's functions, in the order of their constants
// (Neg is 1). Adding one is a line at the end here, then go generate
// ./backend, and its reference in unaryRefs of
// backend/cpu/elementwise_test.go.
var ops = []op{
	// constant, name, how the CPU computes it, its CPU function, its value at x in CUDA, comment
	{"Neg", "neg", inType, "neg", "-x", ""},
	{"Abs", "abs", viaFloat64, "math.Abs", "m_abs(x)", ""},
	{"Sign", "sign", viaFloat64, "sign", "x > 0 ? (T)1 : (x < 0 ? (T)-1 : x)", ""},
	{"Exp", "exp", viaFloat64, "math.Exp", "m_exp(x)", ""},
	{"Log", "log", viaFloat64, "math.Log", "m_log(x)", ""},
	{"Log1p", "log1p", viaFloat64, "math.Log1p", "m_log1p(x)", ""},
	{"Expm1", "expm1", viaFloat64, "math.Expm1", "m_expm1(x)", ""},
	{"Sqrt", "sqrt", viaFloat64, "math.Sqrt", "m_sqrt(x)", ""},
	{"Square", "square", inType, "square", "x * x", ""},
	{"Cube", "cube", inType, "cube", "x * x * x", ""},
	{"Tanh", "tanh", viaFloat64, "math.Tanh", "m_tanh(x)", ""},
	{"Sigmoid", "sigmoid", viaFloat64, "sigmoid", "(T)1 / ((T)1 + m_exp(-x))", ""},
	{"Inverse", "inverse", inType, "inverse", "(T)1 / x", "1/x"},
	{"InverseSqrt", "inversesqrt", viaFloat64, "inverseSqrt", "(T)1 / m_sqrt(x)", ""},
	{"Ceil", "ceil", viaFloat64, "math.Ceil", "m_ceil(x)", ""},
	{"Floor", "floor", viaFloat64, "math.Floor", "m_floor(x)", ""},
	{"ReLU", "relu", inType, "relu", "x < 0 ? (T)0 : x", "max(x, 0)"},
	{"Softplus", "softplus", viaFloat64, "softplus", "x > (T)36 ? x : m_log1p(m_exp(x))", "log(1 + exp(x))"},
	{"Identity", "identity", inType, "identity", "x", ""},
	{"Sin", "sin", viaFloat64, "math.Sin", "m_sin(x)", ""},
	{"Cos", "cos", viaFloat64, "math.Cos", "m_cos(x)", ""},
	{"Log2", "log2", viaFloat64, "math.Log2", "m_log2(x)", ""},
	{"GELU", "gelu", viaFloat64, "gelu", "gelu(x)", "the tanh form, x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))"},
	{"SiLU", "silu", viaFloat64, "silu", "x < (T)-1e30 ? -(T)0 : x / ((T)1 + m_exp(-x))", "x sigmoid(x), also called swish"},
}

// binaryOps are backend.BinaryOp's functions, in the order of their
// constants (Add is 1). Adding one is a line at the end here (its CPU
// function, a generic func[T Float](x, y T) T, in backend/elementwise.go),
// then go generate ./backend, and its reference in binaryRefs of
// backend/cpu/elementwise_test.go.
var binaryOps = []binop{
	// constant, name, its CPU function, cost, its value at x and y in CUDA, comment
	{"Add", "add", "add", 1, "x + y", ""},
	{"Sub", "sub", "sub", 1, "x - y", ""},
	{"Mul", "mul", "mul", 1, "x * y", ""},
	{"Div", "div", "div", 1, "x / y", ""},
	{"Pow", "pow", "pow", 16, "m_pow(x, y)", ""},
	{"Lt", "lt", "lt", 1, "x < y ? (T)1 : (T)0", ""},
	{"Gt", "gt", "gt", 1, "x > y ? (T)1 : (T)0", ""},
	{"Le", "le", "le", 1, "x <= y ? (T)1 : (T)0", ""},
	{"Ge", "ge", "ge", 1, "x >= y ? (T)1 : (T)0", ""},
	{"Eq", "eq", "eq", 1, "x == y ? (T)1 : (T)0", ""},
	{"Ne", "ne", "ne", 1, "x != y ? (T)1 : (T)0", ""},
	{"Max2", "max", "max2", 1, "(x > y || x != x) ? x : y", "max(a, b)"},
	{"Min2", "min", "min2", 1, "(x < y || x != x) ? x : y", "min(a, b)"},
	{"GELUGrad", "gelu-grad", "geluGrad", 16, "y * gelu_deriv(x)", "b GELU'(a): the gradient of GELU at a times b"},
}
