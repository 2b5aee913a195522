"""The ``ToolApproval`` proxy of the results, with the ``robotlab.approve_toolcall`` permission (issue 27, item 4)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('robotlab', '0012_versions_evals'),
    ]

    operations = [
        migrations.CreateModel(
            name='ToolApproval',
            fields=[
            ],
            options={
                'verbose_name': 'tool approval',
                'verbose_name_plural': 'tool approvals',
                'permissions': [('approve_toolcall', "Can approve or deny the tool calls of anyone's runs")],
                'proxy': True,
                'indexes': [],
                'constraints': [],
            },
            bases=('robotlab.robotresult',),
        ),
    ]
