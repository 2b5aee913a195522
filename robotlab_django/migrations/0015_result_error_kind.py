"""Failed runs store the kind of a model provider's failure (``error_kind``), which words the message users see."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('robotlab', '0014_tool_effects'),
    ]

    operations = [
        migrations.AddField(
            model_name='robotresult',
            name='error_kind',
            field=models.CharField(blank=True, default='', help_text="The kind of a model provider's failure (robotlab's InferenceError.kind: rate_limit, auth, timeout, ...), which words the message users see; empty for any other error.", max_length=32, verbose_name='error kind'),
        ),
    ]
