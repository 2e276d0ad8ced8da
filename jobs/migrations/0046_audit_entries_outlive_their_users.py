"""An audit entry's user may be deleted: the entry keeps the name it was written with, and
its `user_id` alone may go to NULL (Django's SET_NULL). Every other change is still refused:
deleting anyone who had acted was a 500, the trigger refusing that UPDATE too."""

from django.db import migrations

REFUSE_ALL_BUT_A_DELETED_USER = """
CREATE OR REPLACE FUNCTION scheduler_audit_unchanged() RETURNS trigger
LANGUAGE plpgsql AS
$$ BEGIN
    IF OLD.user_id IS NOT NULL AND NEW.user_id IS NULL
       AND to_jsonb(NEW) - 'user_id' = to_jsonb(OLD) - 'user_id' THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'audit log entries cannot be changed';
END $$;
"""
REFUSE_ALL = """
CREATE OR REPLACE FUNCTION scheduler_audit_unchanged() RETURNS trigger
LANGUAGE plpgsql AS
$$ BEGIN
    RAISE EXCEPTION 'audit log entries cannot be changed';
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [("jobs", "0045_idempotency_keys_pruned_past_the_window")]

    operations = [migrations.RunSQL(REFUSE_ALL_BUT_A_DELETED_USER, REFUSE_ALL)]
