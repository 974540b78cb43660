"""The calibration overlay: fitted efficiency factors per GPU type, in a YAML file an instance
includes with `calibration: overlay.yaml`. Its factors replace the catalog's for those GPU types
(an instance's inline `gpus[].spec.efficiency` still wins: it is the most specific)."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from fleetopt.errors import InputError
from fleetopt.instance import SAFE_LOADER, Efficiency, describe_validation_error


def read_overlay(path: str | Path) -> dict[str, Efficiency]:
    """GPU type -> efficiency factors; every failure is one InputError naming the file."""
    path = Path(path)
    try:
        data = yaml.load(path.read_text(), Loader=SAFE_LOADER)
    except OSError as exc:
        raise InputError(f"calibration: cannot read {path} ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise InputError(f"calibration: {path} is not valid YAML ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("efficiency"), dict):
        raise InputError(f"calibration: {path} needs a mapping `efficiency: {{GPU type: ...}}`")
    factors = {}
    for gpu, value in data["efficiency"].items():
        try:
            factors[gpu] = Efficiency.model_validate(value)
        except ValidationError as exc:
            detail = describe_validation_error(exc, value)
            raise InputError(f"calibration: {path}: efficiency.{gpu}.{detail}") from None
    return factors


def write_overlay(path: str | Path, gpu: str, efficiency: Efficiency, note: str) -> None:
    """Set one GPU type's factors in the overlay, keeping the other GPU types already there."""
    path = Path(path)
    factors = read_overlay(path) if path.exists() else {}
    factors[gpu] = efficiency
    body = {
        "efficiency": {
            name: eff.model_dump(exclude_none=True) for name, eff in sorted(factors.items())
        }
    }
    header = "".join(f"# {line}\n" for line in note.splitlines())
    path.write_text(header + yaml.safe_dump(body, sort_keys=False))
