"""The SQL store's write side: every changeset reaches the database through here.

An append reads as a straight line: :meth:`~contextledger.stores.sql.store.SQLStore.commit`
hands the changeset to :mod:`.dispatch`, which checks it and sends it by one of three
paths, each built on :mod:`.guard` (the checks up front, the one builder of the version
bump, the commit log that makes a commit exactly-once):

* :mod:`.sqlite_hot` -- a turn (and a turn with an eviction) on SQLite: precompiled
  statements on the driver's own cursor, in ``BEGIN IMMEDIATE``, on a held connection
  (:mod:`.sqlite_writer`);
* :mod:`.pg_append` -- an append on PostgreSQL: one data-modifying statement, one round trip,
  on the connection the store holds for it (:mod:`.pg_writer`);
* :mod:`.apply` -- every other changeset, on both engines: one transaction.
"""
