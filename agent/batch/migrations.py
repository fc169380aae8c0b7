"""The store's schema, as numbered migrations: PRAGMA user_version is the number applied.

Add a migration by appending to MIGRATIONS; never edit one that has shipped.
"""

from __future__ import annotations

MIGRATIONS: list[str] = [
    # 1: runs, tasks, attempts, evaluations
    """
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        batch_key TEXT NOT NULL,
        mode TEXT NOT NULL,
        config_json TEXT NOT NULL,
        versions_json TEXT NOT NULL,
        gpus_json TEXT NOT NULL,
        load_errors_json TEXT NOT NULL DEFAULT '[]',
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        owner TEXT NOT NULL,
        status TEXT NOT NULL,
        started_at REAL NOT NULL,
        heartbeat_at REAL NOT NULL,
        finished_at REAL
    );
    CREATE TABLE tasks (
        key TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        level INTEGER,
        problem_id INTEGER,
        sha256 TEXT NOT NULL,
        path TEXT NOT NULL
    );
    CREATE TABLE attempts (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        batch_key TEXT NOT NULL,
        item_key TEXT NOT NULL,
        task_key TEXT NOT NULL REFERENCES tasks(key),
        candidate TEXT NOT NULL,
        source TEXT,
        status TEXT NOT NULL,
        started_at REAL NOT NULL,
        finished_at REAL,
        verdict TEXT,
        wall_s REAL,
        tokens INTEGER,
        usd REAL,
        gpu_s REAL,
        output_dir TEXT,
        solution_path TEXT,
        transcript_path TEXT,
        error TEXT
    );
    CREATE INDEX attempts_by_item ON attempts(batch_key, item_key);
    CREATE UNIQUE INDEX one_live_attempt ON attempts(batch_key, item_key)
        WHERE status IN ('running', 'done');
    CREATE TABLE evaluations (
        id INTEGER PRIMARY KEY,
        attempt_id INTEGER NOT NULL REFERENCES attempts(id),
        role TEXT NOT NULL,
        verdict TEXT NOT NULL,
        reason TEXT NOT NULL,
        compiled INTEGER NOT NULL,
        correct INTEGER NOT NULL,
        speedup_eager REAL,
        speedup_compile REAL,
        gpu_s REAL NOT NULL,
        compile_s REAL NOT NULL,
        total_s REAL NOT NULL,
        gpu TEXT,
        result_json TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    """,
    # 2: reports join evaluations to attempts by role
    "CREATE INDEX evaluations_by_attempt ON evaluations(attempt_id, role);",
    # 3: a region-by-region run's regions (agent/run/region_records.py RegionRun), one row an attempt
    """
    CREATE TABLE region_runs (
        attempt_id INTEGER PRIMARY KEY REFERENCES attempts(id),
        speedup_eager REAL,
        speedup_compile REAL,
        covered_share REAL NOT NULL,
        run_json TEXT NOT NULL
    );
    """,
    # 4: the precision policy each evaluation was judged under and the precision the judge measured
    # (docs/precision.md); NULL in evaluations from before precision policies
    """
    ALTER TABLE evaluations ADD COLUMN precision TEXT;
    ALTER TABLE evaluations ADD COLUMN measured_precision TEXT;
    """,
]


def statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]
