from typing import Any

from django import forms
from django.template.defaultfilters import filesizeformat

from demofarm.imports.conf import get_config
from demofarm.imports.rows import COLUMNS, BadFile, read


class UploadForm(forms.Form):
    file = forms.FileField(
        label="CSV file",
        help_text=f"UTF-8, with a first line naming the columns {', '.join(COLUMNS)}.",
        widget=forms.ClearableFileInput(attrs={"accept": ".csv,text/csv"}),
    )

    def clean_file(self) -> Any:
        upload = self.cleaned_data["file"]
        config = get_config()
        largest = config["MAX_UPLOAD_BYTES"]
        if upload.size > largest:
            raise forms.ValidationError(
                f"The file is {filesizeformat(upload.size)}; it may be at most {filesizeformat(largest)}."
            )
        data = upload.read()
        # What can be told at once is told at once; the rows are checked by the job.
        try:
            read(data, max_rows=config["MAX_ROWS"])
        except BadFile as exc:
            raise forms.ValidationError(str(exc)) from exc
        self.cleaned_data["data"] = data
        return upload
