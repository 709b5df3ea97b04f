"""Request and response bodies of /api/v1/slurm/accounts."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, Field, model_validator

from sup.common.schemas import Body, PatchBody
from sup.domain.fields import AccountName, GroupName, PartitionName, QosName, SlurmText
from sup.domain.slurm import ROOT_ACCOUNT, SlurmLimits


def _no_repeats(values: list[str]) -> list[str]:
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise ValueError(f"listed more than once: {', '.join(repeated)}")
    return values


QosList = Annotated[list[QosName], Field(max_length=256), AfterValidator(_no_repeats)]
PartitionList = Annotated[list[PartitionName], Field(max_length=256), AfterValidator(_no_repeats)]
Fairshare = Annotated[int, Field(ge=0, le=2**31 - 1)]


class SlurmAccountCreate(Body):
    name: AccountName
    group: GroupName | None = Field(None, description="members of this group get an association")
    coordinators: GroupName | None = Field(
        None, description="members of this group are the account's Slurm coordinators"
    )
    parent: str = Field(ROOT_ACCOUNT, description="'root' or another account SUP manages")
    description: SlurmText | None = None
    organization: SlurmText | None = None
    fairshare: Fairshare | None = None
    qos: QosList = Field(default_factory=list)
    default_qos: QosName | None = None
    partitions: PartitionList = Field(default_factory=list)
    limits: SlurmLimits = Field(default_factory=SlurmLimits)

    @model_validator(mode="after")
    def _default_qos_listed(self) -> SlurmAccountCreate:
        if self.default_qos is not None and self.qos and self.default_qos not in self.qos:
            raise ValueError(f"default_qos {self.default_qos!r} is not in qos")
        return self


class SlurmAccountPatch(PatchBody):
    """Any subset of the account's fields; lists and `limits` replace the current value."""

    required_fields = frozenset({"name", "parent", "qos", "partitions", "limits"})

    name: AccountName | None = None
    group: GroupName | None = None
    coordinators: GroupName | None = None
    parent: str | None = None
    description: SlurmText | None = None
    organization: SlurmText | None = None
    fairshare: Fairshare | None = None
    qos: QosList | None = None
    default_qos: QosName | None = None
    partitions: PartitionList | None = None
    limits: SlurmLimits | None = None


class SlurmAccountOut(BaseModel):
    name: str
    group: str | None
    coordinators: str | None
    parent: str
    description: str | None
    organization: str | None
    fairshare: int | None
    qos: list[str]
    default_qos: str | None
    partitions: list[str]
    limits: dict[str, Any]
    version: int
    created_at: datetime
    updated_at: datetime
