"""The storage's wait for its server (`ladder.storage.outage`): an unreachable server is retried within the bound,
then `StorageUnavailable`; any other error goes up at once."""

from __future__ import annotations

import optuna
import pytest
import sqlalchemy.exc
from optuna.exceptions import StorageInternalError

from ladder.storage import outage


def refused() -> sqlalchemy.exc.OperationalError:
    return sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("connection refused"))


def test_what_counts_as_an_unreachable_server() -> None:
    wrapped = StorageInternalError("An exception is raised during the commit.")
    wrapped.__cause__ = refused()
    assert outage.unreachable(refused()) and outage.unreachable(wrapped)
    assert not outage.unreachable(StorageInternalError("exceeding max length"))
    assert not outage.unreachable(ValueError("bad value"))


def test_a_server_back_within_the_bound_is_waited_for_and_one_that_is_not_stops_the_sweep() -> None:
    storage = optuna.storages.InMemoryStorage()
    waiting = outage.Waiting(storage, "db", retry_s=30.0)
    failures = iter([refused(), refused()])
    real = storage.get_all_studies

    def flaky() -> list[optuna.study.FrozenStudy]:
        if (exc := next(failures, None)) is not None:
            raise exc
        return real()

    storage.get_all_studies = flaky  # type: ignore[method-assign]
    assert waiting.get_all_studies() == []  # two refusals, then the answer
    storage.get_all_studies = lambda: (_ for _ in ()).throw(refused())  # type: ignore[method-assign]
    with pytest.raises(outage.StorageUnavailable, match="unreachable for"):
        outage.Waiting(storage, "db", retry_s=0.0).get_all_studies()
    storage.get_all_studies = lambda: (_ for _ in ()).throw(KeyError("x"))  # type: ignore[method-assign]
    with pytest.raises(KeyError):
        waiting.get_all_studies()
