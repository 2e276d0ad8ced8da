"""Forms of the console. They parse what a browser sends; the rules stay in `jobs.state`."""

from __future__ import annotations

import json
import uuid
from functools import cache
from typing import Any

from django import forms

from jobs import display, limits
from jobs.models import LimitScope, RecurInterval, Theme, UserPreference
from jobs.recurrence import zone_names
from jobs.registry import registry
from jobs.webhooks import DELIVERABLE_EVENT_TYPES

PRIORITY_CHOICES = [(1, "1 · high"), (2, "2 · normal"), (3, "3 · low")]
PAGE_SIZES = [10, 20, 50, 100]


@cache
def time_zone_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in sorted(zone_names())]


class DateTimeLocalInput(forms.DateTimeInput):
    input_type = "datetime-local"

    def __init__(self) -> None:
        super().__init__(format="%Y-%m-%dT%H:%M")


def add_details(form: forms.Form, details: dict[str, list[str]]) -> None:
    """Put a `JobValidationError`'s details next to the fields they name.

    `payload.to` belongs to the payload field, and keeps its path in the message so the
    operator sees which key of the JSON is wrong.
    """
    for key, messages in details.items():
        field, _, rest = key.partition(".")
        target = field if field in form.fields else None
        for message in messages:
            form.add_error(target, f"{key}: {message}" if rest or target is None else message)


class UUIDListField(forms.Field):
    """Job ids separated by commas or spaces: one id, a list of them, or None when empty."""

    def to_python(self, value: Any) -> uuid.UUID | list[uuid.UUID] | None:
        words = str(value or "").replace(",", " ").split()
        try:
            ids = [uuid.UUID(word) for word in words]
        except ValueError:
            raise forms.ValidationError("Job ids (UUIDs), separated by commas.") from None
        if not ids:
            return None
        return ids[0] if len(ids) == 1 else ids


class PayloadForm(forms.Form):
    """A job's payload as the operator types it: parsed here, checked against the job
    type's schema by `jobs.state` (its errors go under the field with `add_details`)."""

    payload = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false", "class": "mono"}),
        initial="{}",
        help_text="A JSON object, checked against the job type's schema.",
    )

    @classmethod
    def editing(cls, payload: Any) -> PayloadForm:
        """The form holding a stored payload, whole (never elided) and indented, its bidi
        controls written as escapes (`display.editable_json`)."""
        return cls(initial={"payload": display.editable_json(payload)})

    def clean_payload(self) -> Any:
        text = self.cleaned_data["payload"]
        try:
            return limits.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
            ) from exc
        except ValueError as exc:
            raise forms.ValidationError(f"Not accepted: {exc}.") from exc


class CreateJobForm(PayloadForm):
    type = forms.ChoiceField(choices=())
    priority = forms.TypedChoiceField(choices=PRIORITY_CHOICES, coerce=int, initial=2)
    scheduled_at = forms.DateTimeField(
        required=False,
        widget=DateTimeLocalInput(),
        label="Scheduled time",
        help_text="In your time zone. Empty means now.",
    )
    recur_interval = forms.ChoiceField(
        required=False,
        choices=[("", "Runs once"), *RecurInterval.choices],
        label="Interval",
    )
    cron = forms.CharField(
        required=False,
        max_length=200,
        label="Cron schedule",
        help_text="5 fields, e.g. 30 2 * * * (02:30 daily): a schedule of runs, in the time "
        "zone below. Not with a scheduled time or an interval.",
        widget=forms.TextInput(attrs={"placeholder": "30 2 * * *", "class": "mono"}),
    )
    timezone = forms.ChoiceField(
        required=False, initial="UTC", label="Schedule time zone", choices=time_zone_choices
    )
    depends_on = UUIDListField(
        required=False,
        label="Depends on",
        help_text="Ids of the jobs that must complete first, separated by commas or spaces.",
        widget=forms.TextInput(attrs={"placeholder": "3f7a1c2d-…", "class": "mono"}),
    )
    max_retries = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=limits.MAX_ATTEMPTS,
        label="Attempts",
        help_text=f"1 to {limits.MAX_ATTEMPTS}; default 3.",
    )
    queue = forms.CharField(
        required=False,
        max_length=100,
        label="Queue",
        help_text="Empty: the job type's queue, else default.",
        widget=forms.TextInput(attrs={"class": "mono"}),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = registry.submittable()
        self.fields["type"].choices = [(name, display.reveal_bidi(name)) for name in names]  # type: ignore[attr-defined]
        self.schemas = {name: registry.get(name).schema for name in names}


class PreferenceForm(forms.ModelForm):
    time_zone = forms.ChoiceField(choices=time_zone_choices, label="Time zone")
    page_size = forms.TypedChoiceField(
        choices=[(n, f"{n} rows") for n in PAGE_SIZES], coerce=int, label="Rows per page"
    )
    theme = forms.ChoiceField(choices=Theme.choices, widget=forms.RadioSelect, label="Theme")

    class Meta:
        model = UserPreference
        fields = ["time_zone", "page_size", "theme"]


class WebhookForm(forms.Form):
    url = forms.CharField(
        label="URL", widget=forms.URLInput(attrs={"placeholder": "https://example.com/hooks"})
    )
    event_types = forms.MultipleChoiceField(
        choices=[(name, name) for name in DELIVERABLE_EVENT_TYPES],
        widget=forms.CheckboxSelectMultiple,
        label="Events to send",
        # jobs.webhooks owns the rule (at least one); its message shows next to the boxes.
        required=False,
    )
    secret = forms.CharField(
        label="Signing secret",
        # Kept as typed: jobs.webhooks refuses whitespace around it rather than trimming it,
        # which would sign with a secret the receiver does not have.
        strip=False,
        help_text="Deliveries carry an HMAC-SHA256 signature made with it.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "class": "mono"}),
    )


class LimitForm(forms.Form):
    scope = forms.ChoiceField(choices=LimitScope.choices, label="Limit the jobs of")
    name = forms.CharField(label="Named", help_text="A job type or a queue name.")
    max_running = forms.IntegerField(label="At most running at once", required=False)
    max_starts = forms.IntegerField(label="At most starts", required=False)
    period_seconds = forms.IntegerField(label="Per seconds", required=False)
