"""A tiny, safe evaluator for the constraint expressions of a tuning space.

Expressions come from a file the model writes, so nothing is ever handed to `eval`: the text is
parsed with `ast` and walked by an interpreter that knows integers, floats and booleans, the
operators + - * / // % (and unary -, not), comparisons (chained too), `and`/`or`, the
conditional `a if c else b`, and the functions min, max and abs. Any other syntax (attributes,
subscripts, lambdas, comprehensions, other calls, strings, **) is rejected when the expression
is parsed, with the offending construct named.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from typing import Any, cast

MAX_LENGTH = 400
MAX_DEPTH = 40
MAX_MAGNITUDE = 2**62

Number = int | float | bool


class ExprError(ValueError):
    """The expression is not allowed or cannot be evaluated; the message says why."""


_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Number, Number], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "abs": abs}
_SYMBOLS = {
    ast.Pow: "**",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.MatMult: "@",
}


class Expr:
    """A parsed, checked expression; `evaluate(names)` computes it for one set of values."""

    def __init__(self, text: str) -> None:
        if not isinstance(text, str) or not text.strip():
            raise ExprError("an expression must be a non-empty string")
        if len(text) > MAX_LENGTH:
            raise ExprError(f"expression longer than {MAX_LENGTH} characters")
        self.text = text.strip()
        try:
            tree = ast.parse(self.text, mode="eval")
        except SyntaxError as exc:
            raise ExprError(f"{self.text!r}: syntax error: {exc.msg}") from None
        self._root = tree.body
        self.names: frozenset[str] = frozenset(self._check(self._root, 0))

    def __repr__(self) -> str:
        return f"Expr({self.text!r})"

    def _check(self, node: ast.AST, depth: int) -> set[str]:
        if depth > MAX_DEPTH:
            raise ExprError(f"{self.text!r}: nested too deeply")
        sub = depth + 1
        if isinstance(node, ast.Constant):
            if type(node.value) not in (int, float, bool):
                raise ExprError(f"{self.text!r}: only numbers and True/False are allowed as constants")
            return set()
        if isinstance(node, ast.Name):
            return {node.id}
        if isinstance(node, ast.BinOp):
            if type(node.op) not in _BINARY:
                symbol = _SYMBOLS.get(type(node.op), type(node.op).__name__)
                raise ExprError(f"{self.text!r}: operator {symbol} is not allowed (use + - * / // %)")
            return self._check(node.left, sub) | self._check(node.right, sub)
        if isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, ast.USub | ast.UAdd | ast.Not):
                raise ExprError(f"{self.text!r}: unary {type(node.op).__name__} is not allowed")
            return self._check(node.operand, sub)
        if isinstance(node, ast.BoolOp):
            return set().union(*(self._check(v, sub) for v in node.values))
        if isinstance(node, ast.Compare):
            for op in node.ops:
                if type(op) not in _COMPARE:
                    raise ExprError(f"{self.text!r}: comparison {type(op).__name__} is not allowed")
            names = self._check(node.left, sub)
            for comparator in node.comparators:
                names |= self._check(comparator, sub)
            return names
        if isinstance(node, ast.IfExp):
            return self._check(node.test, sub) | self._check(node.body, sub) | self._check(node.orelse, sub)
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
                raise ExprError(f"{self.text!r}: only min(), max() and abs() may be called")
            if node.keywords or not node.args or any(isinstance(a, ast.Starred) for a in node.args):
                raise ExprError(f"{self.text!r}: {node.func.id}() takes plain positional arguments")
            return set().union(*(self._check(a, sub) for a in node.args))
        raise ExprError(f"{self.text!r}: {type(node).__name__} is not allowed in a tuning expression")

    def evaluate(self, names: Mapping[str, Number]) -> Number:
        missing = self.names - names.keys()
        if missing:
            raise ExprError(f"{self.text!r}: unknown name(s) {', '.join(sorted(missing))}")
        return self._eval(self._root, names)

    def _eval(self, node: ast.AST, names: Mapping[str, Number]) -> Number:
        if isinstance(node, ast.Constant):
            return cast(Number, node.value)  # the parser admits numeric constants only
        if isinstance(node, ast.Name):
            return names[node.id]
        if isinstance(node, ast.BinOp):
            left, right = self._eval(node.left, names), self._eval(node.right, names)
            try:
                value = _BINARY[type(node.op)](left, right)
            except ZeroDivisionError:
                raise ExprError(f"{self.text!r}: division by zero") from None
            if abs(value) > MAX_MAGNITUDE:
                raise ExprError(f"{self.text!r}: value out of range")
            return value
        if isinstance(node, ast.UnaryOp):
            operand = self._eval(node.operand, names)
            if isinstance(node.op, ast.Not):
                return not operand
            return -operand if isinstance(node.op, ast.USub) else +operand
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                result: Number = True
                for value in node.values:
                    result = self._eval(value, names)
                    if not result:
                        return result
                return result
            result = False
            for value in node.values:
                result = self._eval(value, names)
                if result:
                    return result
            return result
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, names)
            for op, comparator in zip(node.ops, node.comparators, strict=True):
                right = self._eval(comparator, names)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            branch = node.body if self._eval(node.test, names) else node.orelse
            return self._eval(branch, names)
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        args = [self._eval(a, names) for a in node.args]
        if node.func.id == "abs" and len(args) != 1:
            raise ExprError(f"{self.text!r}: abs() takes one argument")
        return _FUNCTIONS[node.func.id](*args)
