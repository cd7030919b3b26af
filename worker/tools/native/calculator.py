"""calculator: arithmetic on numbers, evaluated from the syntax tree (never eval).

strands-cli's operators (+ - * / // % ** and unary + -), bounded so that a hostile
expression cannot spend the worker's CPU or memory: the text's length, the tree's
depth, and the size of every integer (checked before a power or a product is computed).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from strands.types.tools import ToolResult, ToolUse

from strands_durable.worker.tools.native._common import ToolArgError, error, ok, run_tool

TOOL_SPEC = {
    "name": "calculator",
    "description": "Perform basic mathematical calculations (addition, subtraction, "
                   "multiplication, division, exponentiation)",
    "inputSchema": {
        "json": {
            "type": "object",
            "properties": {
                "expression": {
                    "type": "string",
                    "description": "Mathematical expression to evaluate "
                                   "(e.g., '2 + 2', '10 * 5 - 3')",
                }
            },
            "required": ["expression"],
        }
    },
}

MAX_EXPRESSION_CHARS = 1000
MAX_DEPTH = 50
MAX_INT_BITS = 10_000  # about 3000 decimal digits

Number = int | float | complex

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos, ast.USub: operator.neg,
}


class _TooBig(ValueError):
    pass


def _bits(value: Number) -> int:
    return abs(value).bit_length() if isinstance(value, int) else 0


def _check_size(value: Number) -> Number:
    if _bits(value) > MAX_INT_BITS:
        raise _TooBig(f"Error: the result is too large (more than {MAX_INT_BITS} bits)")
    return value


def _precheck(op: ast.operator, left: Number, right: Number) -> None:
    """Refuse a power or product whose result would be too large, before computing it."""
    if (isinstance(op, ast.Pow) and isinstance(right, int | float) and right > 1
            and isinstance(left, int) and abs(left) > 1 and _bits(left) * right > MAX_INT_BITS):
        raise _TooBig(f"Error: the result is too large (more than {MAX_INT_BITS} bits)")
    if isinstance(op, ast.Mult) and _bits(left) + _bits(right) > MAX_INT_BITS + 1:
        raise _TooBig(f"Error: the result is too large (more than {MAX_INT_BITS} bits)")


def _evaluate(node: ast.AST, depth: int = 0) -> Number:
    if depth > MAX_DEPTH:
        raise ValueError(f"Error: the expression is nested deeper than {MAX_DEPTH} levels")
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, depth + 1)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ValueError(f"Error: Unsupported constant type: {type(node.value).__name__}")
        return _check_size(node.value)
    if isinstance(node, ast.BinOp):
        binary = _BINARY.get(type(node.op))
        if binary is None:
            raise ValueError(f"Error: Unsupported operation: {type(node.op).__name__}")
        left, right = _evaluate(node.left, depth + 1), _evaluate(node.right, depth + 1)
        _precheck(node.op, left, right)
        return _check_size(binary(left, right))
    if isinstance(node, ast.UnaryOp):
        unary = _UNARY.get(type(node.op))
        if unary is None:
            raise ValueError(f"Error: Unsupported unary operation: {type(node.op).__name__}")
        return _check_size(unary(_evaluate(node.operand, depth + 1)))
    raise ValueError(f"Error: Unsupported expression type: {type(node).__name__}")


def _calculate(tool: ToolUse, args: dict[str, Any]) -> ToolResult:
    expression = args.get("expression", "")
    if not isinstance(expression, str) or not expression.strip():
        raise ToolArgError("Error: 'expression' parameter is required")
    expression = expression.strip()
    if len(expression) > MAX_EXPRESSION_CHARS:
        return error(tool, f"Error: the expression is longer than {MAX_EXPRESSION_CHARS} "
                           "characters")
    try:
        result = _evaluate(ast.parse(expression, mode="eval"))
    except SyntaxError as exc:
        return error(tool, f"Syntax error in expression: {exc.msg}")
    except ZeroDivisionError:
        return error(tool, "Error: Division by zero")
    except OverflowError:
        return error(tool, "Error: the result is too large")
    except (ValueError, RecursionError, MemoryError) as exc:
        text = str(exc) if isinstance(exc, ValueError) else "the expression is too complex"
        return error(tool, text if text.startswith("Error") else f"Error: {text}")
    if isinstance(result, float) and result.is_integer():
        result = int(result)
    return ok(tool, f"{expression} = {result}")


def calculator(tool: ToolUse, **kwargs: Any) -> ToolResult:
    """Evaluate an arithmetic expression safely."""
    return run_tool(tool, _calculate)
