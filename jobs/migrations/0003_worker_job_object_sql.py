"""`scheduler_time()`: a time as the API writes it, for the job object built in SQL.

The worker's hot statements (claim, complete) build the API job object in SQL, which saves
parsing a dozen timestamps per job in Python and formatting them again: at thousands of
jobs a second that was a third of the worker's CPU. `jobs.representation.represent_row`
stays the reference; a test pins the two equal.
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION scheduler_time(t timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') $$;
"""

DROP = """
DROP FUNCTION IF EXISTS scheduler_time(timestamptz);
"""


class Migration(migrations.Migration):
    dependencies = [("jobs", "0002_admin_dead_letter_job")]

    operations = [migrations.RunSQL(CREATE, DROP)]
